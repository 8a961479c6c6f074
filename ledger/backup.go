package ledger

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/nvdp-project/nvdp/internal/atomicfile"
	bolt "go.etcd.io/bbolt"
)

// Backups and restores of a ledger (docs/serving.md, "Backups and
// restores"). A serving process holds its ledger's exclusive lock, so the
// process itself takes the backup (File.Backup, in one read transaction:
// a consistent copy, charges keep committing meanwhile). Every backup is
// marked as one (meta "backup": BackupMark), and a marked file cannot be
// opened for charging: serving from a backup forgets every charge made
// after it was taken (a rollback, which under-counts what keys received),
// so it takes Restore, with the rollback acknowledged, to make a
// backup a ledger again; the restore is recorded in the ledger (meta
// "restores").

// BackupMark is the meta "backup" of a file written by File.Backup: which
// ledger it copies, and up to which transaction.
type BackupMark struct {
	LedgerID string    `json:"ledger_id"`
	Source   string    `json:"source"` // the ledger's path when it was copied
	Txid     uint64    `json:"txid"`   // the ledger's last committed transaction the copy holds
	Taken    time.Time `json:"taken"`
}

// BackupFileError is the error of a backup opened for charging with
// [OpenFile]: serving from it would roll the ledger back. [Restore] makes it
// a ledger again.
type BackupFileError struct {
	Path string
	Mark BackupMark
}

func (e *BackupFileError) Error() string {
	return fmt.Sprintf("ledger %s is a backup of ledger %s taken %s (transaction %d of %s): serving from it would forget every charge made after it was taken, so budgets could be overspent; restore it explicitly, acknowledging the rollback",
		e.Path, e.Mark.LedgerID, e.Mark.Taken.Format(time.RFC3339), e.Mark.Txid, e.Mark.Source)
}

// RestoreRecord is one entry of a ledger's meta "restores": a rollback the
// operator acknowledged.
type RestoreRecord struct {
	Restored time.Time `json:"restored"`
	From     string    `json:"from"` // the backup's path
	// Backup is the backup's mark (nil only in records of before restores
	// required it: a copy of a ledger that Backup did not write).
	Backup *BackupMark `json:"backup,omitempty"`
	// Replaced is where the file found at the ledger's path was moved ("":
	// there was none).
	Replaced string `json:"replaced,omitempty"`
}

// Info describes a ledger file, as [File.Info] returns it.
type Info struct {
	Path     string `json:"path"`
	LedgerID string `json:"ledger_id"` // "" only in a ledger of before IDs opened read-only
	Format   string `json:"format"`
	// Created is when CreateFile made it (nil: before it was recorded).
	Created  *time.Time `json:"created,omitempty"`
	Txid     uint64     `json:"txid"` // its last committed transaction
	Bytes    int64      `json:"bytes"`
	Accounts int        `json:"accounts"`
	Curves   int        `json:"curves"`
	Releases uint64     `json:"releases"` // charged to all accounts
	// Charges counts the charges of the history (PostgreSQL only; the
	// file's Txid counts its transactions).
	Charges uint64 `json:"charges,omitempty"`
	// SchemaVersion is a PostgreSQL ledger's schema version (0: a file).
	SchemaVersion int `json:"schema_version,omitempty"`
	// Backup is set in a backup (File.Backup): what it copies.
	Backup   *BackupMark     `json:"backup,omitempty"`
	Restores []RestoreRecord `json:"restores,omitempty"`
}

// Info describes the ledger: its identity, history and size.
func (l *File) Info() (Info, error) {
	info := Info{Path: l.path}
	err := l.guard(func() error {
		return l.bf.db.View(func(tx *bolt.Tx) error {
			meta := tx.Bucket(bucketMeta)
			info.LedgerID, info.Format = string(meta.Get(metaLedgerID)), string(meta.Get(metaFormat))
			info.Txid, info.Bytes = uint64(tx.ID()), tx.Size()
			if b := meta.Get(metaCreated); b != nil {
				var t time.Time
				if err := t.UnmarshalText(b); err != nil {
					return fmt.Errorf("meta %s: %w", metaCreated, err)
				}
				info.Created = &t
			}
			if b := meta.Get(metaBackup); b != nil {
				info.Backup = &BackupMark{}
				if err := json.Unmarshal(b, info.Backup); err != nil {
					return fmt.Errorf("meta %s: %w", metaBackup, err)
				}
			}
			if b := meta.Get(metaRestores); b != nil {
				if err := json.Unmarshal(b, &info.Restores); err != nil {
					return fmt.Errorf("meta %s: %w", metaRestores, err)
				}
			}
			info.Curves = tx.Bucket(bucketCurves).Stats().KeyN
			return tx.Bucket(bucketAccounts).ForEach(func(k, v []byte) error {
				rec, err := decodeAccount(string(k), v)
				if err != nil {
					return err
				}
				info.Accounts++
				for _, n := range rec.Releases {
					info.Releases += n
				}
				return nil
			})
		})
	})
	if err != nil {
		return Info{}, fmt.Errorf("ledger %s: %w", l.path, err)
	}
	return info, nil
}

// backupStamp is the time in a backup's name: UTC, sortable, no colons.
const backupStamp = "20060102T150405.000000000Z"

// backupPrefix is the start of the names of this ledger's backups:
// BASE.backup-ID8- (BASE the ledger file's name, ID8 the first 8 hex digits
// of its ID), followed by the time taken (backupStamp).
func (l *File) backupPrefix() string {
	return filepath.Base(l.path) + ".backup-" + l.id[:min(8, len(l.id))] + "-"
}

// Backup writes a consistent copy of the ledger into dir and returns the
// backup's description, whose Path is the backup's.
//
// An empty dir means the ledger's directory. The copy is named
// BASE.backup-ID8-TIME, as backupPrefix makes it, with mode 0600; it is
// marked as a backup with [BackupMark], checked, synced, and linked into
// place complete. The copy is one read transaction: it holds every charge
// committed before it and none after, while charges go on committing.
//
// Backup also works on a ledger whose file was removed or replaced while
// serving, since it copies the file the ledger holds open: this is the
// rescue of a deleted ledger.
func (l *File) Backup(dir string) (Info, error) {
	if dir == "" {
		dir = filepath.Dir(l.path)
	}
	taken := time.Now().UTC()
	path := filepath.Join(dir, l.backupPrefix()+taken.Format(backupStamp))
	tmp, err := prepareLedger(path, func(tmp string) error {
		f, err := os.OpenFile(tmp, os.O_WRONLY, 0)
		if err != nil {
			return err
		}
		mark := BackupMark{LedgerID: l.id, Source: l.path, Taken: taken}
		err = l.guard(func() error {
			return l.bf.db.View(func(tx *bolt.Tx) error {
				mark.Txid = uint64(tx.ID())
				_, err := tx.WriteTo(f)
				return err
			})
		})
		if err = errors.Join(err, f.Close()); err != nil {
			return err
		}
		return editLedger(tmp, func(meta *bolt.Bucket) error {
			b, err := json.Marshal(mark)
			if err != nil {
				return err
			}
			return meta.Put(metaBackup, b)
		})
	})
	if err != nil {
		return Info{}, fmt.Errorf("backup of ledger %s: %w", l.path, err)
	}
	if err := linkLedger(tmp, path); err != nil {
		return Info{}, fmt.Errorf("backup of ledger %s: %w", l.path, err)
	}
	return describe(path)
}

// PruneBackups removes this ledger's oldest backups in dir, keeping the keep
// newest, and returns the paths removed. An empty dir means the ledger's
// directory, and keep must be at least 1. Only files named as
// [File.Backup] names this ledger's are touched.
func (l *File) PruneBackups(dir string, keep int) ([]string, error) {
	if keep < 1 {
		panic(fmt.Sprintf("ledger: PruneBackups keeping %d", keep))
	}
	if dir == "" {
		dir = filepath.Dir(l.path)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var names []string
	for _, e := range entries {
		if e.Type().IsRegular() && strings.HasPrefix(e.Name(), l.backupPrefix()) {
			names = append(names, e.Name())
		}
	}
	slices.Sort(names) // the stamp sorts by time
	var removed []string
	for _, n := range names[:max(0, len(names)-keep)] {
		p := filepath.Join(dir, n)
		if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return removed, err
		}
		removed = append(removed, p)
	}
	return removed, nil
}

// ErrRollbackNotAccepted is Restore's refusal when the rollback is not
// acknowledged.
var ErrRollbackNotAccepted = errors.New("rollback not acknowledged")

// ErrNotBackup is [Restore]'s refusal of a file that lacks [BackupMark]: a
// live ledger, or a copy of one made by hand.
var ErrNotBackup = errors.New("not a backup")

// Restore makes the ledger file backup, written by [File.Backup], the
// ledger at path, and returns the record of the restore.
//
// Restoring is a rollback: every charge made after the backup was taken is
// forgotten, so keys may receive more than their budgets over the ledger's
// life. acceptRollback must say the operator accepts it; else Restore
// returns [ErrRollbackNotAccepted] and nothing changes.
//
// A file without the backup mark is refused with [ErrNotBackup]: restoring
// a live ledger would make a second ledger with its ID while the first one
// stays live, each with every key's full budget. Every backup nvdp has
// written carries the mark, which Backup has set since backups exist. A
// copy made by hand, such as cp of a stopped ledger, has none and is
// refused too: it is indistinguishable from the live file it copies.
//
// The backup is checked, and a corrupt one refused. It is copied beside
// path, its backup mark removed and the restore appended to the copy's meta
// "restores". Only then is a file at path moved aside to
// PATH.replaced-TIME and the copy linked into place. The file moved aside
// is never deleted, and the move is refused while a server holds it. The
// backup itself is left as it was.
func Restore(backup, path string, acceptRollback bool) (RestoreRecord, error) {
	now := time.Now().UTC()
	src, err := OpenFileReadOnly(backup)
	if err != nil {
		return RestoreRecord{}, fmt.Errorf("restore: %w", err)
	}
	info, err := src.Info()
	src.Close()
	if err != nil {
		return RestoreRecord{}, fmt.Errorf("restore: %w", err)
	}
	if info.Backup == nil {
		return RestoreRecord{}, fmt.Errorf("restore of %s to ledger %s: %s has no backup mark, so it may be a live ledger (restoring it would make a second ledger with its ID %s, each with every key's full budget); restore a backup written by `nvdp serve ledger backup` or a serving process (%w)",
			backup, path, backup, info.LedgerID, ErrNotBackup)
	}
	if !acceptRollback {
		return RestoreRecord{}, fmt.Errorf("restore of %s (%s) to ledger %s: a restore rolls the ledger back, forgetting every charge made after the backup was taken, so that keys can receive more than their budgets; it must be acknowledged (%w)",
			backup, backupAge(info.Backup, now), path, ErrRollbackNotAccepted)
	}
	from, err := filepath.Abs(backup)
	if err != nil {
		return RestoreRecord{}, err
	}
	rec := RestoreRecord{Restored: now, From: from, Backup: info.Backup}
	if _, err := os.Lstat(path); err == nil {
		rec.Replaced = path + ".replaced-" + now.Format(backupStamp)
	}
	in, err := os.Open(backup) // read through this handle: backup may be the file at path, moved aside below
	if err != nil {
		return RestoreRecord{}, fmt.Errorf("restore: %w", err)
	}
	defer in.Close()
	tmp, err := prepareLedger(path, func(tmp string) error {
		out, err := os.OpenFile(tmp, os.O_WRONLY, 0)
		if err != nil {
			return err
		}
		_, err = io.Copy(out, in)
		if err = errors.Join(err, out.Close()); err != nil {
			return err
		}
		return editLedger(tmp, func(meta *bolt.Bucket) error {
			var past []RestoreRecord
			if b := meta.Get(metaRestores); b != nil {
				if err := json.Unmarshal(b, &past); err != nil {
					return fmt.Errorf("meta %s: %w", metaRestores, err)
				}
			}
			if meta.Get(metaLedgerID) == nil {
				if err := meta.Put(metaLedgerID, []byte(NewLedgerID())); err != nil {
					return err
				}
			}
			b, err := json.Marshal(append(past, rec))
			if err != nil {
				return err
			}
			return errors.Join(meta.Delete(metaBackup), meta.Put(metaRestores, b))
		})
	})
	if err != nil {
		return RestoreRecord{}, fmt.Errorf("restore of %s to ledger %s: %w", backup, path, err)
	}
	if err := moveAside(path, rec.Replaced); err != nil {
		os.Remove(tmp)
		return RestoreRecord{}, fmt.Errorf("restore of %s to ledger %s: %w", backup, path, err)
	}
	if err := linkLedger(tmp, path); err != nil {
		return rec, fmt.Errorf("restore of %s to ledger %s (the file there was moved to %s): %w", backup, path, rec.Replaced, err)
	}
	return rec, nil
}

// backupAge says what a restore of a backup with mark forgets.
func backupAge(mark *BackupMark, now time.Time) string {
	if mark == nil {
		return "not a marked backup: its age is unknown"
	}
	return fmt.Sprintf("taken %s, %s ago, at transaction %d", mark.Taken.Format(time.RFC3339), now.Sub(mark.Taken).Round(time.Second), mark.Txid)
}

// moveAside renames the file at path to aside, holding its exclusive lock
// (a server's lock refuses it). With aside "" there must be no file at
// path.
func moveAside(path, aside string) error {
	f, err := os.Open(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil
	case err != nil:
		return err
	case aside == "":
		f.Close()
		return fmt.Errorf("ledger %s appeared during the restore: not replaced (%w)", path, ErrExists)
	}
	defer f.Close()
	if err := lockFile(f, true, lockTimeout); err != nil {
		if errors.Is(err, errLocked) {
			return fmt.Errorf("ledger %s is open in another process (a running server?): stop it first", path)
		}
		return err
	}
	if err := os.Rename(path, aside); err != nil {
		return err
	}
	return syncFile(filepath.Dir(path))
}

// describe opens the ledger file at path read-only and returns its Info.
func describe(path string) (Info, error) {
	l, err := OpenFileReadOnly(path)
	if err != nil {
		return Info{}, err
	}
	defer l.Close()
	return l.Info()
}

// editLedger opens the new ledger file at path (a copy this process made:
// checked as every ledger file is), runs edit on its meta bucket in one
// transaction and closes it.
func editLedger(path string, edit func(meta *bolt.Bucket) error) error {
	bf, err := openBolt(path, false)
	if err != nil {
		return err
	}
	err = guard(path, func() error {
		return bf.db.Update(func(tx *bolt.Tx) error {
			meta := tx.Bucket(bucketMeta)
			if meta == nil {
				return &CorruptError{Path: path, Detail: fmt.Sprintf("not an nvdp ledger: no %q bucket", bucketMeta)}
			}
			return edit(meta)
		})
	})
	return errors.Join(err, bf.close(path))
}

// prepareLedger writes a new ledger file with write (given an empty
// temporary file beside path, mode 0600) and syncs it; it returns the
// temporary file's path for linkLedger (removed on error).
func prepareLedger(path string, write func(tmp string) error) (string, error) {
	f, err := atomicfile.CreateTemp(path)
	if err != nil {
		return "", err
	}
	tmp := f.Name()
	if err := f.Close(); err != nil {
		os.Remove(tmp)
		return "", err
	}
	if err := write(tmp); err != nil {
		os.Remove(tmp)
		return "", err
	}
	if err := syncFile(tmp); err != nil {
		os.Remove(tmp)
		return "", err
	}
	return tmp, nil
}

// linkLedger links the prepared file tmp to path, refusing to replace an
// existing file (ErrExists), removes tmp and syncs the directory so
// that the new name survives a crash.
func linkLedger(tmp, path string) error {
	defer os.Remove(tmp)
	if err := os.Link(tmp, path); err != nil {
		if errors.Is(err, fs.ErrExist) {
			return fmt.Errorf("ledger %s exists: not replaced (%w)", path, ErrExists)
		}
		return err
	}
	return syncFile(filepath.Dir(path))
}

// syncFile fsyncs the file or directory at path.
func syncFile(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	return errors.Join(f.Sync(), f.Close())
}
