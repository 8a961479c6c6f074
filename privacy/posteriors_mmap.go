package privacy

import (
	"fmt"
	"os"
	"unsafe"
)

// MapPosteriors is [ReadPosteriors] through a read-only memory map of the
// file. It does the same validation, of the safetensors header, dtypes,
// shapes, byte counts and [Posteriors.Validate], and gives the same values,
// but mu, logvar, alpha and the mask alias the mapped file where its layout
// allows: 4-byte aligned float32 data on a little-endian host. Otherwise they
// are copied as by ReadPosteriors. The file's pages are then page cache, read
// on demand and reclaimable, not a copy in the process's memory, so an audit
// holds only the engine's float64 working copies, about twice the file.
//
// The returned Posteriors is read-only, and writing to its tensors faults.
// It is valid until unmap is called; a file truncated while mapped makes
// reads fault with SIGBUS. On systems without mmap the file is read.
//
// Its errors name the file. They are those of ReadPosteriors, and a file
// that cannot be mapped.
func MapPosteriors(path string) (p *Posteriors, unmap func() error, err error) {
	data, unmap, err := mmapFile(path)
	if err != nil {
		return nil, nil, fmt.Errorf("posteriors: %w", err)
	}
	p, err = parsePosteriors(path, data, true)
	if err != nil {
		_ = unmap()
		return nil, nil, err
	}
	return p, unmap, nil
}

// littleEndian says whether the host stores a float32 as the file does.
var littleEndian = func() bool {
	x := uint16(1)
	return *(*byte)(unsafe.Pointer(&x)) == 1
}()

// aliasFloat32 returns b's little-endian float32 values as a slice aliasing
// b, or nil when it cannot: an empty b, a length not a multiple of 4, an
// address not 4-byte aligned, a big-endian host.
func aliasFloat32(b []byte) []float32 {
	if len(b) == 0 || len(b)%4 != 0 || uintptr(unsafe.Pointer(&b[0]))%4 != 0 || !littleEndian {
		return nil
	}
	return unsafe.Slice((*float32)(unsafe.Pointer(&b[0])), len(b)/4)
}

// readAll is the fallback of mmapFile: the file read into memory.
func readAll(path string) ([]byte, func() error, error) {
	data, err := os.ReadFile(path)
	return data, func() error { return nil }, err
}
