package privacy_test

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"strings"
	"testing"
	"unsafe"

	"github.com/nvdp-project/nvdp/privacy"
	"github.com/nvdp-project/nvdp/privacy/privacytest"
)

// mappedFrom says whether address a lies in a memory mapping of file path
// (/proc/self/maps; Linux).
func mappedFrom(t *testing.T, a uintptr, path string) bool {
	t.Helper()
	f, err := os.Open("/proc/self/maps")
	if err != nil {
		t.Skip("no /proc/self/maps")
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var lo, hi uintptr
		if _, err := fmt.Sscanf(sc.Text(), "%x-%x", &lo, &hi); err == nil && a >= lo && a < hi {
			return strings.HasSuffix(sc.Text(), path)
		}
	}
	return false
}

// TestMapPosteriors: the mapped file gives the values ReadPosteriors gives,
// and its tensors are the file's mapped pages (not a copy) (the audit of the
// mapped posteriors is the audit of the read ones: audit's
// TestAuditMappedPosteriors); a truncated or corrupt file is an error naming
// the file.
func TestMapPosteriors(t *testing.T) {
	dir := t.TempDir()
	path, read, mapped := privacytest.MaskedFile(t, dir)
	if !reflect.DeepEqual(mapped, read) {
		t.Fatalf("mapped posteriors differ from the read ones")
	}
	if runtime.GOOS == "linux" {
		for name, a := range map[string]uintptr{"mu": uintptr(unsafe.Pointer(&mapped.Mu[0])), "logvar": uintptr(unsafe.Pointer(&mapped.Logvar[0])),
			"alpha": uintptr(unsafe.Pointer(&mapped.Alpha[0])), "mask": uintptr(unsafe.Pointer(&mapped.AttentionMask[0]))} {
			if !mappedFrom(t, a, path) {
				t.Errorf("tensor %s is not in a mapping of the file", name)
			}
		}
		if mappedFrom(t, uintptr(unsafe.Pointer(&read.Mu[0])), path) {
			t.Errorf("ReadPosteriors' mu is in a mapping of the file")
		}
	}

	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		data []byte
		want string
	}{
		{"truncated", data[:len(data)-9], "file truncated?"},
		{"header cut", data[:20], ""},
		{"empty", nil, ""},
		{"corrupt header", append([]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f}, data[8:]...), "header"},
	} {
		bad := filepath.Join(dir, c.name+".safetensors")
		if err := os.WriteFile(bad, c.data, 0o644); err != nil {
			t.Fatal(err)
		}
		_, rerr := privacy.ReadPosteriors(bad)
		_, _, merr := privacy.MapPosteriors(bad)
		if merr == nil || !strings.Contains(merr.Error(), bad) || !strings.Contains(merr.Error(), c.want) {
			t.Errorf("%s: error %v, want one naming %s and %q", c.name, merr, bad, c.want)
		}
		if rerr == nil || merr.Error() != rerr.Error() {
			t.Errorf("%s: mapped error %v, read error %v: want the same", c.name, merr, rerr)
		}
	}
	if _, _, err := privacy.MapPosteriors(filepath.Join(dir, "missing.safetensors")); err == nil || !strings.Contains(err.Error(), "missing.safetensors") {
		t.Errorf("missing file: %v", err)
	}
}

// TestMapPosteriorFileErrors: every case of the reader's error table gives
// the same result through the memory map (the same error, or the same
// posteriors).
func TestMapPosteriorFileErrors(t *testing.T) {
	dir := t.TempDir()
	for i, c := range privacytest.FileCases(t) {
		path := filepath.Join(dir, fmt.Sprintf("case%d.safetensors", i))
		if err := os.WriteFile(path, c.Data, 0o644); err != nil {
			t.Fatal(err)
		}
		read, rerr := privacy.ReadPosteriors(path)
		mapped, unmap, merr := privacy.MapPosteriors(path)
		if (rerr == nil) != (merr == nil) || (rerr != nil && rerr.Error() != merr.Error()) {
			t.Errorf("%s: mapped error %v, read error %v", c.Name, merr, rerr)
			continue
		}
		if merr == nil {
			if !reflect.DeepEqual(mapped, read) {
				t.Errorf("%s: mapped posteriors differ", c.Name)
			}
			if err := unmap(); err != nil {
				t.Error(err)
			}
		}
	}
}
