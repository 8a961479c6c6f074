package serve

import (
	"bufio"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"

	"github.com/nvdp-project/nvdp/internal/atomicfile"
	"github.com/nvdp-project/nvdp/ledger"
	"github.com/nvdp-project/nvdp/option"
)

// KeyPrefix starts every API key GenerateKey makes, so that secret scanners
// and people recognise one.
const KeyPrefix = "nvdp_"

// keyBytes is the entropy of a key: 256 bits from crypto/rand.
const keyBytes = 32

// Key is one line of a keys file, a [ledger.Key]: the key's ID, which names
// its account, the SHA-256 of the key, its budget and its line.
type Key = ledger.Key

// Keys is a parsed keys file: keys by the SHA-256 of their secret. The
// secrets themselves are never stored, read back or logged.
type Keys struct {
	file   string
	byHash map[[sha256.Size]byte]*Key
	ids    map[string]*Key
}

// HashKey returns the SHA-256 of an API key, as the keys file stores it; it
// is [ledger.HashKey].
func HashKey(key string) [sha256.Size]byte { return ledger.HashKey(key) }

// GenerateKey returns a new API key: KeyPrefix and 32 bytes of crypto/rand
// in unpadded base64url, 48 characters in all.
func GenerateKey() (string, error) {
	b := make([]byte, keyBytes)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("generate key: %w", err)
	}
	return KeyPrefix + base64.RawURLEncoding.EncodeToString(b), nil
}

// KeyLine returns the keys-file line of a key: "ID SHA256-HEX" and, unless
// budget is Auto, the budget, "inf" for +Inf. Errors: an ID that CheckKeyID
// rejects, a budget that is negative or NaN is not Auto.
func KeyLine(id, key string, budget float64) (string, error) {
	if err := ledger.CheckKeyID(id); err != nil {
		return "", err
	}
	h := HashKey(key)
	line := id + " " + hex.EncodeToString(h[:])
	switch {
	case option.IsAuto(budget):
	case math.IsInf(budget, 1):
		line += " inf"
	case budget >= 0:
		line += " " + strconv.FormatFloat(budget, 'g', -1, 64)
	default:
		return "", fmt.Errorf("budget %v: must be >= 0", budget)
	}
	return line, nil
}

// ReadKeys reads a keys file and parses it with [ParseKeys]. The file must
// not be writable by its group or others: whoever can write it can add a key
// of their own and spend a budget. Errors: the file cannot be read, its mode
// lets others write it, ParseKeys'.
func ReadKeys(path string) (*Keys, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("keys: %w", err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("keys: %w", err)
	}
	if err := checkKeysMode(path, st.Mode()); err != nil {
		return nil, err
	}
	return ParseKeys(path, f)
}

// checkKeysMode refuses a keys file that its group or others may write.
func checkKeysMode(path string, mode os.FileMode) error {
	if mode.Perm()&0o022 != 0 {
		return fmt.Errorf("keys %s is writable by group or others (mode %#o): anyone who can write it can add a key and spend a budget; chmod go-w %s (keygen makes it 0600)", path, mode.Perm(), path)
	}
	return nil
}

// ParseKeys parses a keys file named name: UTF-8 text, one key per line,
// "ID SHA256-HEX [BUDGET]" separated by spaces or tabs. ID matches
// [A-Za-z0-9][A-Za-z0-9._-]{0,63}; SHA256-HEX is the 64 lower- or
// upper-case hex digits of the key's SHA-256; BUDGET, in epsilon at the
// model's delta, is a number >= 0 or "inf", and a line without one takes
// the server's default. Blank lines and lines starting with # are skipped.
// Errors name the file and line: a malformed line, a duplicate ID or hash,
// a file with no key.
func ParseKeys(name string, r io.Reader) (*Keys, error) {
	k, err := parseKeys(name, r)
	if err != nil {
		return nil, err
	}
	if len(k.ids) == 0 {
		return nil, fmt.Errorf("keys %s: no key (lines \"ID SHA256-HEX [BUDGET]\"; `nvdp serve keygen` adds one)", name)
	}
	return k, nil
}

// parseKeys is ParseKeys without the check that there is a key.
func parseKeys(name string, r io.Reader) (*Keys, error) {
	k := &Keys{file: name, byHash: map[[sha256.Size]byte]*Key{}, ids: map[string]*Key{}}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 4096), 4096)
	n := 0
	for sc.Scan() {
		n++
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		key, err := parseKeyLine(line)
		if err != nil {
			return nil, fmt.Errorf("keys %s:%d: %w", name, n, err)
		}
		key.Line = n
		if prev, ok := k.ids[key.ID]; ok {
			return nil, fmt.Errorf("keys %s:%d: ID %q already on line %d", name, n, key.ID, prev.Line)
		}
		if prev, ok := k.byHash[key.Hash]; ok {
			return nil, fmt.Errorf("keys %s:%d: the hash of line %d (key %q) again", name, n, prev.Line, prev.ID)
		}
		k.ids[key.ID], k.byHash[key.Hash] = key, key
	}
	if err := sc.Err(); err != nil {
		if errors.Is(err, bufio.ErrTooLong) {
			return nil, fmt.Errorf("keys %s:%d: line longer than 4096 bytes", name, n+1)
		}
		return nil, fmt.Errorf("keys %s: %w", name, err)
	}
	return k, nil
}

// parseKeyLine parses "ID SHA256-HEX [BUDGET]".
func parseKeyLine(line string) (*Key, error) {
	f := strings.Fields(line)
	if len(f) < 2 || len(f) > 3 {
		return nil, fmt.Errorf("%d fields, want \"ID SHA256-HEX [BUDGET]\"", len(f))
	}
	if ledger.CheckKeyID(f[0]) != nil {
		return nil, fmt.Errorf("ID %q: want 1 to 64 of A-Z a-z 0-9 . _ -, starting with a letter or digit", f[0])
	}
	key := &Key{ID: f[0], Budget: option.Auto()}
	h, err := hex.DecodeString(f[1])
	if err != nil || len(h) != sha256.Size {
		return nil, fmt.Errorf("key %q: hash is not 64 hex digits (the SHA-256 of the key, never the key itself)", f[0])
	}
	copy(key.Hash[:], h)
	if len(f) == 3 {
		b, err := strconv.ParseFloat(f[2], 64)
		if f[2] == "inf" {
			b, err = math.Inf(1), nil
		}
		if err != nil || !(b >= 0) {
			return nil, fmt.Errorf("key %q: budget %q is not a number >= 0 or inf", f[0], f[2])
		}
		key.Budget = b
	}
	return key, nil
}

// KeySource authenticates the API keys of a Server. It is a keys file, a
// [*Keys] read by [ReadKeys], which the server's ReloadKeys replaces while
// serving, as `nvdp serve` does on SIGHUP; or the keys table of a
// PostgreSQL ledger, a [*pgledger.Ledger], where keys are added, rotated and
// revoked while the replicas run. Both store only the SHA-256 of each key.
type KeySource interface {
	// LookupKey returns the key whose hash is SHA-256(secret); nil and no
	// error when there is none (or it was revoked). An error means the
	// source could not be read (a database that does not answer:
	// ledger.ErrUnavailable): the request is refused with 503, not 401.
	LookupKey(secret string) (*Key, error)
}

// LookupKey is Lookup, for [KeySource].
func (k *Keys) LookupKey(secret string) (*Key, error) { return k.Lookup(secret), nil }

// fileKeySource is the KeySource of a server's keys file: the *Keys its
// ReloadKeys last stored.
type fileKeySource struct{ p *atomic.Pointer[Keys] }

func (f fileKeySource) LookupKey(secret string) (*Key, error) { return f.p.Load().Lookup(secret), nil }

// Lookup returns the key whose hash is the SHA-256 of secret, or nil. The
// map lookup is on the hash of a 256-bit secret, so its timing tells
// nothing usable about the secret.
func (k *Keys) Lookup(secret string) *Key {
	if k == nil || secret == "" {
		return nil
	}
	return k.byHash[HashKey(secret)]
}

// ID returns the key with that ID, or nil.
func (k *Keys) ID(id string) *Key {
	if k == nil {
		return nil
	}
	return k.ids[id]
}

// All returns the keys in file order.
func (k *Keys) All() []*Key {
	if k == nil {
		return nil
	}
	out := make([]*Key, 0, len(k.ids))
	for _, key := range k.ids {
		out = append(out, key)
	}
	slices.SortFunc(out, func(a, b *Key) int { return a.Line - b.Line })
	return out
}

// File is the name the keys were read from.
func (k *Keys) File() string { return k.file }

// AppendKey appends a key line to the keys file at path and syncs it. A
// missing file is created with mode 0600. It first checks that an existing
// file parses, is not writable by group or others, as ReadKeys requires,
// and holds neither the ID nor the hash. The key itself is never written.
func AppendKey(path, id, key string, budget float64) error {
	line, err := KeyLine(id, key, budget)
	if err != nil {
		return err
	}
	data, err := os.ReadFile(path)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("keys: %w", err)
	}
	if st, err := os.Stat(path); err == nil {
		if err := checkKeysMode(path, st.Mode()); err != nil {
			return err
		}
	}
	prefix := ""
	if len(data) > 0 && data[len(data)-1] != '\n' {
		prefix = "\n"
	}
	// The file as it will be: its lines are checked, and the new ID and hash
	// must be new.
	if _, err := parseKeys(path, strings.NewReader(string(data)+prefix+line+"\n")); err != nil {
		return err
	}
	if err := atomicfile.AppendSync(path, []byte(prefix+line+"\n"), 0o600); err != nil {
		return fmt.Errorf("keys: %w", err)
	}
	return nil
}
