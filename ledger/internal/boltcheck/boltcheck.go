// Package boltcheck checks the structure of a bbolt file before bbolt maps
// it: the page checker of the ledger's file (package ledger).
package boltcheck

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"hash/fnv"
	"io"
)

// Check checks the structure of a ledger's bbolt file before bbolt maps
// it (docs/serving.md, "A corrupt ledger"). bbolt trusts its file: a page
// id, an element offset or a freelist entry out of range makes it index
// past a slice (a panic) or read past the end of the mapping (SIGBUS, which
// no recover catches), and its own Tx.Check reports from a goroutine of its
// own, where a panic takes the process down. Check reads the file
// with ReadAt only, never maps it, and proves every fact bbolt relies on
// when it opens the file and reads or writes any key of it:
//
//   - both meta pages have bbolt's magic, version and FNV-64a checksum, the
//     same page size, and a root, freelist and high-water mark in range;
//   - the file holds every page below the high-water mark of the newer meta
//     (the one bbolt uses);
//   - every page reachable from that meta's root bucket, nested and inline
//     buckets included, is a branch or leaf page whose header names it,
//     whose elements and their keys and values lie inside the page, whose
//     keys increase within the bounds its parent gives, and which is
//     reached once only;
//   - the freelist page lists increasing page ids in range, none of them
//     reachable, and every page below the high-water mark is a meta page,
//     the freelist, reachable or free (bbolt's "unreachable unfreed").
//
// A file that fails one of these is an error saying what is wrong, where
// (package ledger makes it a *ledger.CorruptError). The layout below is
// bbolt v1.4's (go.etcd.io/bbolt/internal/common: page.go, meta.go,
// bucket.go), in the machine's byte order as bbolt writes it.

// The bbolt file format's constants (internal/common/types.go, page.go).
const (
	boltMagic        = 0xED0CDAED
	boltVersion      = 2
	boltPageHeader   = 16 // id uint64, flags uint16, count uint16, overflow uint32
	boltMetaSize     = 64 // magic, version, page size, flags (uint32 each), root bucket (2 x uint64), freelist, pgid, txid, checksum (uint64 each)
	boltMetaSummed   = 56 // the meta's bytes before its checksum
	boltElementSize  = 16 // a leaf element (flags, pos, ksize, vsize: uint32 each) or a branch element (pos, ksize uint32; pgid uint64)
	boltBucketHeader = 16 // root pgid, sequence (uint64 each)
	boltBranchPage   = 0x01
	boltLeafPage     = 0x02
	boltMetaPage     = 0x04
	boltFreelistPage = 0x10
	boltBucketLeaf   = 0x01 // leaf element flag: the value is a bucket
	boltNoFreelist   = ^uint64(0)
	boltFreelistOver = 0xFFFF // a freelist page's count that says the real count is its first id
	// boltMinPage and boltMaxPage bound the page sizes accepted (bbolt
	// searches 1 KiB to 16 MiB for its second meta page).
	boltMinPage = 1 << 10
	boltMaxPage = 16 << 20
	// boltMaxDepth bounds bucket nesting and tree height: a ledger has two
	// levels of buckets and shallow trees; deeper is corruption.
	boltMaxDepth = 64
)

// boltMeta is a meta page's fields.
type boltMeta struct {
	magic, version, pageSize, flags uint32
	root, sequence                  uint64
	freelist, pgid, txid, checksum  uint64
	sum                             uint64 // the checksum computed over the fields
}

// parseBoltMeta reads the meta that follows the page header in b (at least
// boltPageHeader + boltMetaSize bytes).
func parseBoltMeta(b []byte) boltMeta {
	le := binary.NativeEndian
	m := b[boltPageHeader : boltPageHeader+boltMetaSize]
	h := fnv.New64a()
	h.Write(m[:boltMetaSummed])
	return boltMeta{
		magic: le.Uint32(m[0:]), version: le.Uint32(m[4:]), pageSize: le.Uint32(m[8:]), flags: le.Uint32(m[12:]),
		root: le.Uint64(m[16:]), sequence: le.Uint64(m[24:]), freelist: le.Uint64(m[32:]), pgid: le.Uint64(m[40:]),
		txid: le.Uint64(m[48:]), checksum: le.Uint64(m[56:]), sum: h.Sum64(),
	}
}

// check reports what is wrong with meta page id (nil: valid).
func (m boltMeta) check(id int) error {
	switch {
	case m.magic != boltMagic:
		return fmt.Errorf("meta page %d: not a bbolt meta page (magic %#x)", id, m.magic)
	case m.version != boltVersion:
		return fmt.Errorf("meta page %d: bbolt format version %d, want %d", id, m.version, boltVersion)
	case m.checksum != m.sum:
		return fmt.Errorf("meta page %d: checksum %#x, its bytes sum to %#x", id, m.checksum, m.sum)
	case m.pageSize < boltMinPage || m.pageSize > boltMaxPage || m.pageSize&(m.pageSize-1) != 0:
		return fmt.Errorf("meta page %d: page size %d", id, m.pageSize)
	case m.pgid < 4:
		return fmt.Errorf("meta page %d: high-water mark %d below the 4 pages of an empty database", id, m.pgid)
	case m.root < 2 || m.root >= m.pgid:
		return fmt.Errorf("meta page %d: root page %d outside [2, %d)", id, m.root, m.pgid)
	case m.freelist == boltNoFreelist:
		return fmt.Errorf("meta page %d: no freelist (a ledger always syncs its freelist)", id)
	case m.freelist < 2 || m.freelist >= m.pgid:
		return fmt.Errorf("meta page %d: freelist page %d outside [2, %d)", id, m.freelist, m.pgid)
	}
	return nil
}

// Info is what Check learns of a file that passes.
type Info struct {
	PageSize int
	Txid     uint64 // the transaction of the meta bbolt uses
	HWM      uint64 // its high-water mark: the file holds pages [0, HWM)
}

// Check checks the structure of the bbolt file r of size bytes (see
// the comment at the top of this file). Errors are plain: the caller wraps
// them with the file's path.
func Check(r io.ReaderAt, size int64) (Info, error) {
	info, _, err := check(r, size)
	return info, err
}

// Pages checks the file as Check does and also returns what holds each
// page below the high-water mark: "meta", "freelist", "free" or the bucket
// whose tree it is (the tests corrupt chosen pages with it).
func Pages(r io.ReaderAt, size int64) (Info, map[uint64]string, error) { return check(r, size) }

// check is Check, with the pages' owners.
func check(r io.ReaderAt, size int64) (Info, map[uint64]string, error) {
	head := make([]byte, boltPageHeader+boltMetaSize)
	if size < int64(len(head)) {
		return Info{}, nil, fmt.Errorf("%d bytes: shorter than a bbolt meta page", size)
	}
	if _, err := r.ReadAt(head, 0); err != nil {
		return Info{}, nil, fmt.Errorf("meta page 0: %w", err)
	}
	m0 := parseBoltMeta(head)
	if err := m0.check(0); err != nil {
		return Info{}, nil, err
	}
	ps := int64(m0.pageSize)
	if size < 2*ps {
		return Info{}, nil, fmt.Errorf("%d bytes: shorter than the two meta pages of %d bytes", size, ps)
	}
	if _, err := r.ReadAt(head, ps); err != nil {
		return Info{}, nil, fmt.Errorf("meta page 1: %w", err)
	}
	m1 := parseBoltMeta(head)
	if err := m1.check(1); err != nil {
		return Info{}, nil, err
	}
	if m1.pageSize != m0.pageSize {
		return Info{}, nil, fmt.Errorf("meta pages: page sizes %d and %d differ", m0.pageSize, m1.pageSize)
	}
	m := m0
	if m1.txid > m0.txid { // bbolt uses the valid meta of the higher transaction
		m = m1
	}
	if need := int64(m.pgid) * ps; m.pgid > uint64(size/ps) || size < need {
		return Info{}, nil, fmt.Errorf("%d bytes: truncated, the database's %d pages of %d bytes need %d", size, m.pgid, ps, int64(m.pgid)*ps)
	}
	c := &boltChecker{r: r, pageSize: int(ps), hwm: m.pgid, owner: map[uint64]string{0: "meta", 1: "meta"}}
	if err := c.tree(m.root, nil, nil, 0, "root bucket"); err != nil {
		return Info{}, nil, err
	}
	if err := c.freelist(m.freelist); err != nil {
		return Info{}, nil, err
	}
	for id := uint64(2); id < m.pgid; id++ {
		if _, ok := c.owner[id]; !ok {
			return Info{}, nil, fmt.Errorf("page %d: neither reachable nor free", id)
		}
	}
	return Info{PageSize: int(ps), Txid: m.txid, HWM: m.pgid}, c.owner, nil
}

// boltChecker walks a bbolt file's pages.
type boltChecker struct {
	r        io.ReaderAt
	pageSize int
	hwm      uint64
	owner    map[uint64]string // page id -> what holds it (meta, freelist, a bucket's tree, free)
}

// page reads page id and its overflow pages, checks that its header names
// it with one of the flags want, that it lies below the high-water mark and
// that no other page or the freelist holds it, and records it for what.
func (c *boltChecker) page(id uint64, want uint16, what string) ([]byte, error) {
	if id < 2 || id >= c.hwm {
		return nil, fmt.Errorf("%s: page %d outside [2, %d)", what, id, c.hwm)
	}
	head := make([]byte, boltPageHeader)
	if _, err := c.r.ReadAt(head, int64(id)*int64(c.pageSize)); err != nil {
		return nil, fmt.Errorf("%s: page %d: %w", what, id, err)
	}
	le := binary.NativeEndian
	hid, flags, overflow := le.Uint64(head[0:]), le.Uint16(head[8:]), uint64(le.Uint32(head[12:]))
	switch {
	case hid != id:
		return nil, fmt.Errorf("%s: page %d: its header says page %d", what, id, hid)
	case flags&want == 0 || flags&(flags-1) != 0:
		return nil, fmt.Errorf("%s: page %d: page type %#x", what, id, flags)
	case overflow >= c.hwm-id:
		return nil, fmt.Errorf("%s: page %d: %d overflow pages run past the high-water mark %d", what, id, overflow, c.hwm)
	}
	for p := id; p <= id+overflow; p++ {
		if prev, ok := c.owner[p]; ok {
			return nil, fmt.Errorf("%s: page %d is also in %s", what, p, prev)
		}
		c.owner[p] = what
	}
	buf := make([]byte, (overflow+1)*uint64(c.pageSize))
	if _, err := c.r.ReadAt(buf, int64(id)*int64(c.pageSize)); err != nil {
		return nil, fmt.Errorf("%s: page %d: %w", what, id, err)
	}
	return buf, nil
}

// elements returns the count of a branch or leaf page (or inline page) p
// and checks that its element headers fit in it.
func elements(p []byte, what string) (int, error) {
	n := int(binary.NativeEndian.Uint16(p[10:]))
	if boltPageHeader+n*boltElementSize > len(p) {
		return 0, fmt.Errorf("%s: %d elements do not fit in %d bytes", what, n, len(p))
	}
	return n, nil
}

// span returns p[off : off+n] after checking that it lies in p.
func span(p []byte, off, n uint64, what string) ([]byte, error) {
	if off > uint64(len(p)) || n > uint64(len(p))-off {
		return nil, fmt.Errorf("%s: %d bytes at offset %d run past the page's %d", what, n, off, len(p))
	}
	return p[off : off+n], nil
}

// keyIn checks that key is non-empty, above prev (strictly) and in [lo, hi)
// (nil bounds: open).
func keyIn(key, prev, lo, hi []byte, first bool, what string) error {
	switch {
	case len(key) == 0:
		return fmt.Errorf("%s: empty key", what)
	case !first && bytes.Compare(key, prev) <= 0:
		return fmt.Errorf("%s: keys out of order", what)
	case lo != nil && bytes.Compare(key, lo) < 0, hi != nil && bytes.Compare(key, hi) >= 0:
		return fmt.Errorf("%s: key outside its parent's range", what)
	}
	return nil
}

// tree checks the B+tree rooted at page id, whose keys lie in [lo, hi).
func (c *boltChecker) tree(id uint64, lo, hi []byte, depth int, what string) error {
	if depth > boltMaxDepth {
		return fmt.Errorf("%s: deeper than %d levels", what, boltMaxDepth)
	}
	p, err := c.page(id, boltBranchPage|boltLeafPage, what)
	if err != nil {
		return err
	}
	where := fmt.Sprintf("%s, page %d", what, id)
	if binary.NativeEndian.Uint16(p[8:]) == boltLeafPage {
		return c.leaf(p, lo, hi, depth, false, where)
	}
	n, err := elements(p, where)
	if err != nil {
		return err
	}
	if n == 0 {
		return fmt.Errorf("%s: branch page without elements", where)
	}
	le := binary.NativeEndian
	keys := make([][]byte, n)
	children := make([]uint64, n)
	for i := range n {
		e := uint64(boltPageHeader + i*boltElementSize)
		pos, ksize := uint64(le.Uint32(p[e:])), uint64(le.Uint32(p[e+4:]))
		if keys[i], err = span(p, e+pos, ksize, where); err != nil {
			return err
		}
		if err := keyIn(keys[i], keys[max(i-1, 0)], lo, hi, i == 0, where); err != nil {
			return err
		}
		children[i] = le.Uint64(p[e+8:])
	}
	for i, child := range children {
		chi := hi
		if i+1 < n {
			chi = keys[i+1]
		}
		if err := c.tree(child, keys[i], chi, depth+1, what); err != nil {
			return err
		}
	}
	return nil
}

// leaf checks the elements of the leaf page p, whose keys lie in [lo, hi),
// and the buckets its values hold; an inline page (inline) holds no bucket.
func (c *boltChecker) leaf(p []byte, lo, hi []byte, depth int, inline bool, where string) error {
	n, err := elements(p, where)
	if err != nil {
		return err
	}
	le := binary.NativeEndian
	var prev []byte
	for i := range n {
		e := uint64(boltPageHeader + i*boltElementSize)
		flags, pos := le.Uint32(p[e:]), uint64(le.Uint32(p[e+4:]))
		ksize, vsize := uint64(le.Uint32(p[e+8:])), uint64(le.Uint32(p[e+12:]))
		kv, err := span(p, e+pos, ksize+vsize, where)
		if err != nil {
			return err
		}
		key, val := kv[:ksize], kv[ksize:]
		if err := keyIn(key, prev, lo, hi, i == 0, where); err != nil {
			return err
		}
		prev = key
		switch flags {
		case 0:
		case boltBucketLeaf:
			if inline {
				return fmt.Errorf("%s: a bucket inside an inline bucket", where)
			}
			if err := c.bucket(key, val, depth, where); err != nil {
				return err
			}
		default:
			return fmt.Errorf("%s: element flags %#x", where, flags)
		}
	}
	return nil
}

// bucket checks the bucket stored as the value val under key: a root page
// of its own, or (root 0) an inline leaf page after the bucket header.
func (c *boltChecker) bucket(key, val []byte, depth int, where string) error {
	what := fmt.Sprintf("bucket %q", key)
	if len(val) < boltBucketHeader {
		return fmt.Errorf("%s: %s: %d-byte value, shorter than a bucket header", where, what, len(val))
	}
	if root := binary.NativeEndian.Uint64(val); root != 0 {
		return c.tree(root, nil, nil, depth+1, what)
	}
	inline := val[boltBucketHeader:]
	if len(inline) < boltPageHeader {
		return fmt.Errorf("%s: inline page of %d bytes", what, len(inline))
	}
	if f := binary.NativeEndian.Uint16(inline[8:]); f != boltLeafPage {
		return fmt.Errorf("%s: inline page type %#x", what, f)
	}
	if depth+1 > boltMaxDepth {
		return fmt.Errorf("%s: deeper than %d levels", what, boltMaxDepth)
	}
	return c.leaf(inline, nil, nil, depth+1, true, what+" (inline)")
}

// freelist checks the freelist page id: increasing free page ids below the
// high-water mark, none reachable.
func (c *boltChecker) freelist(id uint64) error {
	p, err := c.page(id, boltFreelistPage, "freelist")
	if err != nil {
		return err
	}
	le := binary.NativeEndian
	n, at := uint64(le.Uint16(p[10:])), uint64(boltPageHeader)
	if n == boltFreelistOver {
		n, at = le.Uint64(p[boltPageHeader:]), at+8
	}
	if n > (uint64(len(p))-at)/8 {
		return fmt.Errorf("freelist page %d: %d ids do not fit in %d bytes", id, n, len(p))
	}
	var prev uint64
	for i := range n {
		free := le.Uint64(p[at+8*i:])
		switch {
		case free < 2 || free >= c.hwm:
			return fmt.Errorf("freelist page %d: free page %d outside [2, %d)", id, free, c.hwm)
		case i > 0 && free <= prev:
			return fmt.Errorf("freelist page %d: ids out of order at %d", id, free)
		}
		if holder, ok := c.owner[free]; ok {
			return fmt.Errorf("freelist page %d: free page %d is in %s", id, free, holder)
		}
		c.owner[free] = "free"
		prev = free
	}
	return nil
}
