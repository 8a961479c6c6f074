package ledger

import (
	"crypto/sha256"
	"fmt"
	"regexp"
)

// Key is an API key as a ledger's accounts know it: the public ID that
// names the key's account in the ledger, the access logs and the metrics,
// the SHA-256 of the key, and its budget in epsilon at the model's delta,
// where option.Auto() means the server's default. Keys live in a keys file
// of package serve or in the keys table of a [pgledger.Ledger].
type Key struct {
	ID     string
	Hash   [sha256.Size]byte
	Budget float64
	Line   int // line in the keys file, for errors (0: not from a file)
}

// idPattern is what a key ID may be: it names an account in the ledger and
// appears in logs, so it is short and plain.
var idPattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$`)

// CheckKeyID checks a key's ID: 1 to 64 of A-Z a-z 0-9 . _ -, starting with
// a letter or digit. Errors name the ID.
func CheckKeyID(id string) error {
	if !idPattern.MatchString(id) {
		return fmt.Errorf("key ID %q: want 1 to 64 of A-Z a-z 0-9 . _ -, starting with a letter or digit", id)
	}
	return nil
}

// HashKey returns the SHA-256 of an API key, as keys files and databases
// store it. A key is 256 random bits, so a fast hash suffices: there is no
// password to guess, and no stretching.
func HashKey(key string) [sha256.Size]byte { return sha256.Sum256([]byte(key)) }
