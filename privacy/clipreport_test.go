package privacy

import (
	"errors"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nvdp-project/nvdp/option"
)

// TestNewClipSetReportWitness: with ClipSetOptions.Witness the report
// writes the pair attaining the one-release certificate at the order and
// direction (WitnessPair's), and names the file; an unbounded set writes
// none; a pair too large to fit is an option error for "witness" before any
// work; the model's labels are the report's.
func TestNewClipSetReportWitness(t *testing.T) {
	ro := ReportOptions{Order: 1.5, Direction: DirectionPaper, Releases: 3, Delta: DefaultDelta, Source: "test"}
	set := mainJobSet()
	set.Components, set.Dims = 5, 4
	dir := t.TempDir()
	path := filepath.Join(dir, "w.safetensors")
	r, err := NewClipSetReport(set, ClipSetOptions{ReportOptions: ro, Witness: path, Model: "m", Variant: "v", Mode: "principled"})
	if err != nil {
		t.Fatal(err)
	}
	w, err := ReadPosteriors(path)
	if err != nil {
		t.Fatal(err)
	}
	want, _, err := WitnessPair(set, ro.Order, ro.Direction)
	if err != nil {
		t.Fatal(err)
	}
	if r.Witness != path || r.Model != "m" || r.Variant != "v" || r.Mode != "principled" || w.M != 2 || len(w.Mu) != len(want.Mu) {
		t.Fatalf("witness %q model %q %q %q, pair of %d", r.Witness, r.Model, r.Variant, r.Mode, w.M)
	}
	for i := range w.Mu {
		if w.Mu[i] != want.Mu[i] || w.Logvar[i] != want.Logvar[i] {
			t.Fatalf("witness value %d: %v %v, WitnessPair's %v %v", i, w.Mu[i], w.Logvar[i], want.Mu[i], want.Logvar[i])
		}
	}
	if b, err := PairBoundWith(ro.Order, w.View(0), w.View(1), BoundOptions{Direction: ro.Direction}); err != nil || relErr(b.Total, float64(r.RDPerRelease)) > 1e-9 && math.Abs(b.Total-float64(r.RDPerRelease)) > 1e-12 {
		t.Errorf("the witness's bound %v (%v), the report's per release %v", b, err, r.RDPerRelease)
	}

	noWitness, err := NewClipSetReport(set, ClipSetOptions{ReportOptions: ro})
	if err != nil || noWitness.Witness != "" || noWitness.Model != "" || noWitness.RDPerRelease != r.RDPerRelease {
		t.Errorf("without a witness: %v, witness %q, per release %v", err, noWitness.Witness, noWitness.RDPerRelease)
	}

	unbounded := set
	unbounded.CMu = math.Inf(1)
	upath := filepath.Join(dir, "u.safetensors")
	if r, err := NewClipSetReport(unbounded, ClipSetOptions{ReportOptions: ro, Witness: upath}); err != nil || r.Witness != "" || r.Finite {
		t.Errorf("unbounded: %v, witness %q", err, r.Witness)
	}
	if _, err := os.Stat(upath); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("unbounded: a witness was written (%v)", err)
	}

	large := set
	large.Components, large.Dims = 10_000_000, 128
	_, err = NewClipSetReport(large, ClipSetOptions{ReportOptions: ro, Witness: filepath.Join(dir, "l.safetensors")})
	var oe *option.Error
	if !errors.As(err, &oe) || oe.Option != "witness" || !strings.HasPrefix(oe.Reason, "witness: 10000000 components x 128 dims take about") {
		t.Errorf("too large: %v, want an option error for witness", err)
	}

	// a witness into a directory that does not exist is refused before any
	// work, the path shown as given; then the report options are checked
	nodir := filepath.Join(dir, "none", "w.safetensors")
	_, err = NewClipSetReport(set, ClipSetOptions{ReportOptions: ro, Witness: nodir})
	if want := "witness " + nodir + ": the directory " + filepath.Dir(nodir) + " does not exist"; !errors.As(err, &oe) || oe.Option != "witness" || err.Error() != want {
		t.Errorf("no directory: %v, want %q", err, want)
	}
	bad := ro
	bad.Releases = 0
	if err := (ClipSetOptions{ReportOptions: bad, Witness: path}).Validate(); !errors.As(err, &oe) || oe.Option != "releases" {
		t.Errorf("releases 0: %v, want the report options' error", err)
	}
}
