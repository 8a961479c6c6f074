//go:build windows || plan9 || solaris || aix || android

package ledger

import (
	"os"
	"time"
)

// lockFile does nothing where the ledger does not use flock: the file is
// checked before bbolt takes its own lock.
func lockFile(*os.File, bool, time.Duration) error { return nil }

// unlockFile does nothing where lockFile does nothing.
func unlockFile(*os.File) error { return nil }
