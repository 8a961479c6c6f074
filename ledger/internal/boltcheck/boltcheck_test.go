package boltcheck

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	bolt "go.etcd.io/bbolt"
)

// boltFile writes a bbolt file of n keys in two nested buckets and returns
// its bytes.
func boltFile(t *testing.T, n int) []byte {
	t.Helper()
	path := filepath.Join(t.TempDir(), "x.db")
	db, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	err = db.Update(func(tx *bolt.Tx) error {
		b, err := tx.CreateBucket([]byte("outer"))
		if err != nil {
			return err
		}
		inner, err := b.CreateBucket([]byte("inner"))
		if err != nil {
			return err
		}
		for i := range n {
			if err := inner.Put([]byte(fmt.Sprintf("key%06d", i)), bytes.Repeat([]byte{byte(i)}, 100)); err != nil {
				return err
			}
		}
		return nil
	})
	if err := errors.Join(err, db.Close()); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestCheck: a file bbolt wrote passes, every page below the high-water
// mark accounted for (Pages); cut short, with a meta page's byte changed,
// or empty, it fails with what is wrong.
func TestCheck(t *testing.T) {
	good := boltFile(t, 2000)
	info, owners, err := Pages(bytes.NewReader(good), int64(len(good)))
	if err != nil || info.HWM < 16 || int64(info.HWM)*int64(info.PageSize) > int64(len(good)) {
		t.Fatalf("a file bbolt wrote: %+v %v", info, err)
	}
	for id := range info.HWM {
		if owners[id] == "" {
			t.Errorf("page %d not accounted for", id)
		}
	}
	flipped := bytes.Clone(good)
	flipped[boltPageHeader+20] ^= 0xff // meta 0's root
	for _, tc := range []struct {
		name string
		b    []byte
		err  string
	}{
		{"empty", nil, "shorter than a bbolt meta page"},
		{"cut short", good[:len(good)/2], "truncated"},
		{"meta byte changed", flipped, "meta page 0: checksum"},
		{"not bbolt", bytes.Repeat([]byte("x"), 8192), "not a bbolt meta page"},
	} {
		if _, err := Check(bytes.NewReader(tc.b), int64(len(tc.b))); err == nil || !strings.Contains(err.Error(), tc.err) {
			t.Errorf("%s: %v, want %q", tc.name, err, tc.err)
		}
	}
}
