package inbound

import (
	"cmp"
	"errors"
	"io"
	"strings"
	"testing"
	"testing/iotest"
)

func TestRead(t *testing.T) {
	t.Parallel()
	small := `{"model":"glm-5"}`
	big := strings.Repeat("x", MaxBuf+10)
	tests := []struct {
		name          string
		body          io.Reader
		contentLength int64
		limit         int64
		want          string
		wantErr       error
		// wantCap bounds the buffer a request holds while it waits; 0 skips.
		wantCap int
		budget  int64 // body bytes in flight; 0: 1 GiB
	}{
		{name: "known length sized exactly", body: strings.NewReader(small), contentLength: int64(len(small)), limit: 1 << 20, want: small, wantCap: len(small) + 1},
		{name: "unknown length", body: iotest.OneByteReader(strings.NewReader(small)), contentLength: -1, limit: 1 << 20, want: small, wantCap: MinBuf},
		{name: "empty", body: strings.NewReader(""), contentLength: 0, limit: 1 << 20, want: "", wantCap: 1},
		{name: "declared length over limit", body: strings.NewReader(small), contentLength: 1 << 21, limit: 1 << 20, wantErr: ErrTooLarge},
		{name: "undeclared length over limit", body: strings.NewReader(small), contentLength: -1, limit: 4, wantErr: ErrTooLarge},
		{name: "large declared length grows past the first buffer", body: strings.NewReader(big), contentLength: int64(len(big)), limit: 1 << 21, want: big},
		{name: "declared length beyond the bytes in flight", body: strings.NewReader(small), contentLength: 1000, limit: 1 << 20, budget: 1000, wantErr: ErrBudget},
		{name: "undeclared length growing beyond the bytes in flight", body: strings.NewReader(big), contentLength: -1, limit: 1 << 21, budget: 1 << 16, wantErr: ErrBudget},
		{name: "read error", body: iotest.ErrReader(io.ErrUnexpectedEOF), contentLength: 10, limit: 1 << 20, wantErr: io.ErrUnexpectedEOF},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var b Body
			budget := NewBodyBytes(cmp.Or(tt.budget, 1<<30))
			err := Read(tt.body, &b, tt.contentLength, tt.limit, budget)
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("Read error = %v, want %v", err, tt.wantErr)
			}
			if got := budget.InUse(); got != b.Held || got < int64(cap(b.Raw)) && err == nil {
				t.Errorf("bytes in flight %d, held %d, buffer %d: want held = in flight >= buffer", got, b.Held, cap(b.Raw))
			}
			b.Release(budget)
			if got := budget.InUse(); got != 0 {
				t.Errorf("after release %d bytes in flight, want 0", got)
			}
			if tt.wantErr != nil {
				return
			}
			if string(b.Raw) != tt.want {
				t.Errorf("body = %.40q (%d bytes), want %.40q (%d bytes)", b.Raw, len(b.Raw), tt.want, len(tt.want))
			}
			if tt.wantCap > 0 && cap(b.Raw) != tt.wantCap {
				t.Errorf("buffer capacity = %d, want %d", cap(b.Raw), tt.wantCap)
			}
		})
	}
}
