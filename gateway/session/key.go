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
	conv := combine(hs, ht, hf)
	if len(system) == 0 {
		return Prompt{Conversation: conv, System: conv}
	}
	return Prompt{Conversation: conv, System: combine(hs, ht, 0)}
}

// sampleBytes bounds what partHash reads of one part: a part longer than
// twice this is hashed by its length, its first and its last sampleBytes.
// Agents' system prompts and tool lists run to tens of KiB; telling two of
// them apart needs far less, and a collision only puts two conversations
// on one binding (affinity orders candidates, nothing more).
const sampleBytes = 1024

// partHash is the hash of one part with its length, so that moving bytes
// from one part to the next changes the result. One-shot xxhash.Sum64 calls
// over the bytes, combined with the length: no streaming digest to set up
// and drain per part.
func partHash(b []byte) uint64 {
	switch {
	case len(b) == 0:
		return emptyPartHash
	case len(b) > 2*sampleBytes:
		return combine(uint64(len(b)), xxhash.Sum64(b[:sampleBytes]), xxhash.Sum64(b[len(b)-sampleBytes:]))
	}
	return combine(uint64(len(b)), xxhash.Sum64(b), 0)
}

// emptyPartHash is partHash of an absent part (most requests have no tools,
// OpenAI chat no top-level system prompt).
var emptyPartHash = combine(0, xxhash.Sum64(nil), 0)

// combine hashes three part hashes in order.
func combine(a, b, c uint64) uint64 {
	var buf [24]byte
	binary.LittleEndian.PutUint64(buf[0:], a)
	binary.LittleEndian.PutUint64(buf[8:], b)
	binary.LittleEndian.PutUint64(buf[16:], c)
	return xxhash.Sum64(buf[:])
}

// keyBufLen is the stack buffer KeyOf lays its input out in: a client key
// id, a model name and a session id (at most MaxIDLen) of usual lengths fit,
// so that the key is one xxhash.Sum64 call; longer ones take the
// streaming digest.
const keyBufLen = 512

// KeyOf is the affinity key of a request by client key keyID for model: its
// session id when it has one, else its conversation hash, and its system
// hash. Zero is never returned.
func KeyOf(keyID, model, sessionID string, p Prompt) Key {
	var buf [keyBufLen]byte
	var k Key
	if n := 8 + len(keyID) + 8 + len(model) + 1 + 8 + len(sessionID) + 8; n <= keyBufLen {
		b := appendString(buf[:0], keyID)
		b = appendString(b, model)
		b = appendSession(b, sessionID, p)
		b = binary.LittleEndian.AppendUint64(b, p.System)
		k = Key(xxhash.Sum64(b))
	} else {
		var d xxhash.Digest
		d.Reset()
		_, _ = d.Write(appendString(buf[:0], keyID))
		_, _ = d.Write(appendString(buf[:0], model))
		_, _ = d.Write(appendSession(buf[:0], sessionID, p))
		_, _ = d.Write(binary.LittleEndian.AppendUint64(buf[:0], p.System))
		k = Key(d.Sum64())
	}
	if k == 0 {
		k = 1
	}
	return k
}

// appendString appends s with its length before it.
func appendString(b []byte, s string) []byte {
	b = binary.LittleEndian.AppendUint64(b, uint64(len(s)))
	return append(b, s...)
}

// appendSession appends what names the conversation: the session id, or
// without one the conversation hash (a tag byte keeps the two apart).
func appendSession(b []byte, sessionID string, p Prompt) []byte {
	if sessionID != "" {
		return appendString(append(b, 1), sessionID)
	}
	return binary.LittleEndian.AppendUint64(append(b, 0), p.Conversation)
}
