//go:build !unix

package privacy

// mmapFile reads path into memory: this system has no syscall.Mmap.
func mmapFile(path string) ([]byte, func() error, error) { return readAll(path) }
