//go:build !windows && !plan9 && !solaris && !aix && !android

package ledger

import (
	"errors"
	"os"
	"syscall"
	"time"
)

// lockFile takes the advisory lock bbolt takes on a database file (flock:
// exclusive for a writer, shared for readers), retrying until timeout, so
// that the file is checked (checkLedgerFile) under the lock the process
// then holds; bbolt's own flock of the same open file succeeds at once.
// errLocked: another process holds a conflicting lock.
func lockFile(f *os.File, exclusive bool, timeout time.Duration) error {
	how := syscall.LOCK_SH
	if exclusive {
		how = syscall.LOCK_EX
	}
	deadline := time.Now().Add(timeout)
	for {
		err := syscall.Flock(int(f.Fd()), how|syscall.LOCK_NB)
		switch {
		case err == nil:
			return nil
		case !errors.Is(err, syscall.EWOULDBLOCK):
			return err
		case time.Now().After(deadline):
			return errLocked
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// unlockFile releases the lock of f. Closing f does not when bbolt's memory
// map still holds the file (a map made by an Open that panicked is never
// unmapped): the lock belongs to the open file, which the map keeps.
func unlockFile(f *os.File) error { return syscall.Flock(int(f.Fd()), syscall.LOCK_UN) }
