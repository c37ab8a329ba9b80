package session

import (
	"encoding/binary"

	"github.com/cespare/xxhash/v2"
)

// Key is an affinity key: a 64-bit hash of (client key, model, session or
// conversation, system prompt and tools). It is the same on every replica
// (xxhash has no per-process seed), so cluster mode can share bindings by it.
type Key uint64

// Prompt holds the hashes of a request's prompt that affinity needs, from
// the byte ranges the body scan marked.
type Prompt struct {
	// Conversation is the hash of the system prompt, tools and first
	// message: every turn of one conversation shares it.
	Conversation uint64
	// System is the hash of the system prompt and tools (the first message
	// too when the request has no system prompt of its own, as OpenAI chat
	// keeps it there): a subagent, same session but its own system prompt,
	// gets a binding of its own.
	System uint64
}

// HashPrompt hashes the ranges of a body: system (Anthropic's system or the
// Responses API's instructions), tools and the first message (nil when
// absent). Each part is hashed once (partHash), and the two hashes combine
// the parts' hashes.
func HashPrompt(system, tools, first []byte) Prompt {
	hs, ht, hf := partHash(system), partHash(tools), partHash(first)
	sys := combine(hs, ht, 0)
	if len(system) == 0 {
		sys = combine(hs, ht, hf)
	}
	return Prompt{Conversation: combine(hs, ht, hf), System: sys}
}

// sampleBytes bounds what partHash reads of one part: a part longer than
// twice this is hashed by its length, its first and its last sampleBytes.
// Agents' system prompts and tool lists run to tens of KiB; telling two of
// them apart needs far less, and a collision only puts two conversations
// on one binding (affinity orders candidates, nothing more).
const sampleBytes = 1024

// partHash is the hash of one part with its length, so that moving bytes
// from one part to the next changes the result.
func partHash(b []byte) uint64 {
	var d xxhash.Digest
	d.Reset()
	var n [8]byte
	binary.LittleEndian.PutUint64(n[:], uint64(len(b)))
	_, _ = d.Write(n[:])
	if len(b) > 2*sampleBytes {
		_, _ = d.Write(b[:sampleBytes])
		_, _ = d.Write(b[len(b)-sampleBytes:])
	} else {
		_, _ = d.Write(b)
	}
	return d.Sum64()
}

// combine hashes three part hashes in order.
func combine(a, b, c uint64) uint64 {
	var buf [24]byte
	binary.LittleEndian.PutUint64(buf[0:], a)
	binary.LittleEndian.PutUint64(buf[8:], b)
	binary.LittleEndian.PutUint64(buf[16:], c)
	return xxhash.Sum64(buf[:])
}

// KeyOf is the affinity key of a request by client key keyID for model: its
// session id when it has one, else its conversation hash, and its system
// hash. Zero is never returned.
func KeyOf(keyID, model, sessionID string, p Prompt) Key {
	var d xxhash.Digest
	d.Reset()
	writeString(&d, keyID)
	writeString(&d, model)
	if sessionID != "" {
		_, _ = d.Write([]byte{1})
		writeString(&d, sessionID)
	} else {
		var c [9]byte
		binary.LittleEndian.PutUint64(c[1:], p.Conversation)
		_, _ = d.Write(c[:])
	}
	var s [8]byte
	binary.LittleEndian.PutUint64(s[:], p.System)
	_, _ = d.Write(s[:])
	k := Key(d.Sum64())
	if k == 0 {
		k = 1
	}
	return k
}

func writeString(d *xxhash.Digest, s string) {
	var n [8]byte
	binary.LittleEndian.PutUint64(n[:], uint64(len(s)))
	_, _ = d.Write(n[:])
	_, _ = d.WriteString(s)
}
