//go:build unix

package privacy

import (
	"fmt"
	"os"
	"syscall"
)

// mmapFile maps path read-only (PROT_READ, MAP_SHARED) and returns the
// bytes and the function that unmaps them. An empty file is read (mmap
// refuses length 0; the parser then says what is missing).
func mmapFile(path string) ([]byte, func() error, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, nil, err
	}
	size := st.Size()
	if size == 0 {
		return readAll(path)
	}
	if size != int64(int(size)) {
		return nil, nil, fmt.Errorf("%s: %d bytes do not fit in memory addresses", path, size)
	}
	data, err := syscall.Mmap(int(f.Fd()), 0, int(size), syscall.PROT_READ, syscall.MAP_SHARED)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: mmap: %w", path, err)
	}
	return data, func() error { return syscall.Munmap(data) }, nil
}
