package limits

import (
	"math/bits"
	"reflect"
	"strconv"
	"strings"

	"github.com/go-playground/validator/v10"
)

// Prices are the settings key "prices": per model pattern (as in a client
// key's models: provider/model, a bare upstream id, or provider/*), what a
// million tokens cost in US dollars. No price ships built in: a model without
// one costs 0.
//
// Write ranges: at most MaxPrices patterns; each value from 0 to 10000 with
// at most 6 decimals (a JSON number; 2, 2.5 and 1e-6 are fine).
type Prices map[string]Price

// Price is one pattern's price per million tokens. Input and Output absent
// = 0; CachedInput (cache reads, every style) absent = Input; CacheWrite
// (cache writes) absent = 1.25 × Input, Anthropic's price of a 5-minute write.
type Price struct {
	Input       *Micros `json:"input,omitempty" validate:"omitnil,usd"`
	Output      *Micros `json:"output,omitempty" validate:"omitnil,usd"`
	CachedInput *Micros `json:"cachedInput,omitempty" validate:"omitnil,usd"`
	CacheWrite  *Micros `json:"cacheWrite,omitempty" validate:"omitnil,usd"`
}

// Micros is an amount of US dollars in millionths (int64): prices and
// spend are never floats. It encodes to JSON as dollars ("2.5").
type Micros int64

// MicrosPerUSD is one dollar in Micros.
const MicrosPerUSD = 1_000_000

// MaxPrice is the highest price per million tokens (10 000 USD); MaxPrices
// the most patterns the prices setting may hold.
const (
	MaxPrice  Micros = 10_000 * MicrosPerUSD
	MaxPrices        = 500
)

// MarshalJSON writes m as dollars with up to 6 decimals.
func (m Micros) MarshalJSON() ([]byte, error) { return []byte(m.String()), nil }

// String is m as dollars: "2", "0.000001", "-1.5".
func (m Micros) String() string {
	neg := m < 0
	u := uint64(m)
	if neg {
		u = -u
	}
	s := strconv.FormatUint(u/MicrosPerUSD, 10)
	if frac := u % MicrosPerUSD; frac != 0 {
		f := strconv.FormatUint(frac+MicrosPerUSD, 10)[1:] // six digits, leading zeros kept
		s += "." + strings.TrimRight(f, "0")
	}
	if neg {
		s = "-" + s
	}
	return s
}

// ParseUSD reads a JSON number of dollars with at most 6 decimals as Micros,
// exactly (no float rounding); ok is false for anything else, and for
// magnitudes past 10^12 dollars.
func ParseUSD(s string) (m Micros, ok bool) {
	s = strings.TrimSpace(s)
	if len(s) == 0 || len(s) > 40 {
		return 0, false
	}
	neg := s[0] == '-'
	if neg {
		s = s[1:]
	}
	mant, exp := s, 0
	if i := strings.IndexAny(s, "eE"); i >= 0 {
		e, err := strconv.Atoi(strings.TrimPrefix(s[i+1:], "+"))
		if err != nil || e < -30 || e > 30 {
			return 0, false
		}
		mant, exp = s[:i], e
	}
	intPart, frac, hasDot := strings.Cut(mant, ".")
	if intPart == "" || (hasDot && frac == "") || !allDigits(intPart) || !allDigits(frac) ||
		(len(intPart) > 1 && intPart[0] == '0') {
		return 0, false
	}
	// digits × 10^(exp − len(frac)) dollars = digits × 10^(exp − len(frac) + 6) micros.
	digits := strings.TrimLeft(intPart+frac, "0")
	shift := exp - len(frac) + 6
	for shift < 0 {
		if digits == "" {
			break
		}
		if digits[len(digits)-1] != '0' {
			return 0, false // more than 6 decimals
		}
		digits = digits[:len(digits)-1]
		shift++
	}
	if digits == "" {
		return 0, true
	}
	if len(digits)+max(shift, 0) > 18 {
		return 0, false
	}
	n, err := strconv.ParseInt(digits+strings.Repeat("0", max(shift, 0)), 10, 64)
	if err != nil {
		return 0, false
	}
	if neg {
		n = -n
	}
	return Micros(n), true
}

func allDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// tagUSD is the validator rule of a price: 0 to MaxPrice.
const tagUSD = "usd"

func validateUSD(fl validator.FieldLevel) bool {
	f := fl.Field()
	if f.Kind() != reflect.Int64 {
		return false
	}
	return f.Int() >= 0 && f.Int() <= int64(MaxPrice)
}

// usdMessage says what a price must be.
func usdMessage() message {
	return newMessage(CodeUSD, "must be a number of US dollars from 0 to %v with at most 6 decimals", int64(MaxPrice/MicrosPerUSD))
}

// MaxBudgetUSD is the highest money budget of a client key (1 000 000 USD);
// budgetCents is the step of a budget (one cent: at most 2 decimals).
const (
	MaxBudgetUSD Micros = 1_000_000 * MicrosPerUSD
	budgetCents  Micros = MicrosPerUSD / 100
)

// tagBudgetUSD is the validator rule of a money budget: 0 to MaxBudgetUSD,
// whole cents.
const tagBudgetUSD = "budgetusd"

func validateBudgetUSD(fl validator.FieldLevel) bool {
	f := fl.Field()
	if f.Kind() != reflect.Int64 {
		return false
	}
	return f.Int() >= 0 && f.Int() <= int64(MaxBudgetUSD) && f.Int()%int64(budgetCents) == 0
}

// budgetUSDMessage says what a money budget must be.
func budgetUSDMessage() message {
	return newMessage(CodeBudgetUSD, "must be a number of US dollars from 0 to %v with at most 2 decimals", int64(MaxBudgetUSD/MicrosPerUSD))
}

// microsMessage says what a field of Micros with validator rules must be: a
// money budget or a price.
func microsMessage(rules string) message {
	if strings.Contains(rules, tagBudgetUSD) {
		return budgetUSDMessage()
	}
	return usdMessage()
}

// Rate is a resolved price: Micros per million tokens of each kind, the
// defaults of absent prices applied (CachedInput = Input; CacheWrite shows
// 1.25 × Input rounded down, and Cost charges it exactly).
type Rate struct {
	Input, Output, CachedInput, CacheWrite Micros
	// Found is false when no pattern matched (the model has no price).
	Found bool
	// writeDefault: CacheWrite was absent, and is 1.25 × Input exactly.
	writeDefault bool
}

// Lookup returns the price of provider's upstream model: the pattern
// "provider/model" first, then the bare "model", then "provider/*" (the most
// specific wins). Found is false when none matches.
func (p Prices) Lookup(provider, model string) Rate {
	for _, k := range [...]string{provider + "/" + model, model, provider + "/*"} {
		if pr, ok := p[k]; ok {
			return pr.rate()
		}
	}
	return Rate{}
}

// rate is pr resolved, its defaults applied.
func (pr Price) rate() Rate {
	in := valueOr(pr.Input, 0)
	r := Rate{Input: in, Output: valueOr(pr.Output, 0), CachedInput: valueOr(pr.CachedInput, in), Found: true}
	if pr.CacheWrite != nil {
		r.CacheWrite = *pr.CacheWrite
	} else {
		r.CacheWrite, r.writeDefault = in/4*5+in%4*5/4, true
	}
	return r
}

// Cost is what a request's tokens cost at r, in Micros, rounded up (a budget
// is never undercharged): in is every prompt token processed, of which
// cacheRead were read from the prompt cache and cacheWrite written to it,
// and out the output; (in − cacheRead − cacheWrite) × Input + cacheRead ×
// CachedInput + cacheWrite × CacheWrite + out × Output, per million. It is
// exact (128-bit integers, no float) and saturates instead of overflowing;
// negative counts are 0, and the cache counts are cut to fit within in.
func (r Rate) Cost(in, cacheRead, cacheWrite, out int64) Micros {
	ps := r.parts(in, cacheRead, cacheWrite, out)
	return costOf(ps[:]...)
}

// The parts of a cost, in the order of Split.
const (
	PartInput = iota // input not read from or written to the cache
	PartCacheRead
	PartCacheWrite
	PartOutput
	nParts
)

// CostPart is one kind of a request's tokens, its price per million
// tokens (the default write price shown rounded down to a Micro) and what
// those tokens cost alone, rounded up.
type CostPart struct {
	Tokens int64
	Price  Micros
	Cost   Micros
}

// Split is Cost part by part (PartInput, PartCacheRead, PartCacheWrite,
// PartOutput), each rounded up alone: the parts' sum may exceed Cost by at
// most 3 Micros.
func (r Rate) Split(in, cacheRead, cacheWrite, out int64) [nParts]CostPart {
	ps := r.parts(in, cacheRead, cacheWrite, out)
	prices := [nParts]Micros{r.Input, r.CachedInput, r.CacheWrite, r.Output}
	var s [nParts]CostPart
	for i, p := range ps {
		s[i] = CostPart{Tokens: p.tokens, Price: prices[i], Cost: costOf(p)}
	}
	return s
}

// part is a count of tokens and its price in quarters of a Micro per
// million tokens (1.25 × Input is whole then).
type part struct {
	tokens int64
	price4 uint64
}

// parts is the request's tokens by kind at r, clamped (see Cost).
func (r Rate) parts(in, cacheRead, cacheWrite, out int64) [nParts]part {
	in, cacheRead, cacheWrite, out = max(in, 0), max(cacheRead, 0), max(cacheWrite, 0), max(out, 0)
	cacheRead = min(cacheRead, in)
	cacheWrite = min(cacheWrite, in-cacheRead)
	q4 := func(m Micros) uint64 { return uint64(max(m, 0)) * 4 }
	write4 := q4(r.CacheWrite)
	if r.writeDefault {
		write4 = uint64(max(r.Input, 0)) * 5
	}
	return [nParts]part{{in - cacheRead - cacheWrite, q4(r.Input)}, {cacheRead, q4(r.CachedInput)}, {cacheWrite, write4}, {out, q4(r.Output)}}
}

// costOf is the sum of ps in Micros, rounded up, saturating.
func costOf(ps ...part) Micros {
	var hiSum, loSum uint64
	for _, p := range ps {
		if p.tokens <= 0 || p.price4 == 0 {
			continue
		}
		hi, lo := bits.Mul64(uint64(p.tokens), p.price4)
		var c uint64
		loSum, c = bits.Add64(loSum, lo, 0)
		hiSum += hi + c
	}
	const per = 4 * 1_000_000
	if hiSum >= per { // the quotient would not fit in 64 bits
		return Micros(1<<63 - 1)
	}
	q, rem := bits.Div64(hiSum, loSum, per)
	if rem != 0 {
		q++
	}
	if q > 1<<63-1 {
		return Micros(1<<63 - 1)
	}
	return Micros(q)
}

// clonePrices copies p deeply.
func clonePrices(p Prices) Prices {
	if len(p) == 0 {
		return nil
	}
	out := make(Prices, len(p))
	for k, v := range p {
		out[k] = Price{Input: clonePtr(v.Input), Output: clonePtr(v.Output), CachedInput: clonePtr(v.CachedInput),
			CacheWrite: clonePtr(v.CacheWrite)}
	}
	return out
}
