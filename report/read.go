package report

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"

	"github.com/nvdp-project/nvdp/sweep"
	"github.com/nvdp-project/nvdp/train"
)

// Options say what [Read] reads besides the cells of the sweep directory.
type Options struct {
	// Attacks is the directory of the attack reports
	// (attack_distinguish*.json, attack_invert*.json,
	// attack_attribute*.json); "" is the sweep directory.
	Attacks string
	// AllowPartial reads a sweep whose manifest lists cells without
	// report.json (failed, running, not run yet): they are left out of the
	// tables and listed in Tables.Missing. Without it they are a
	// [*MissingCellsError].
	AllowPartial bool
}

// Read reads the sweep directory root into its tables: every cell under it,
// that is each directory holding report.json; each task's C_mu selection;
// and the attack reports under o.Attacks.
//
// A sweep's manifest lists the cells the sweep planned: sweep.json, written
// by `nvdp sweep`, or the stages.json of a sweep in stages not finished yet.
// A planned cell without report.json makes a [*MissingCellsError], unless
// o.AllowPartial: then a warning names the cells left out (slog). A tree of
// runs without either manifest is read as it is.
//
// It returns an error for no report.json under root, a file that does not
// parse, missing cells, and an attack report that does not parse; the files
// are named.
func Read(root string, o Options) (*Tables, error) {
	missing, err := missingCells(root)
	if err != nil {
		return nil, err
	}
	if len(missing) > 0 && !o.AllowPartial {
		return nil, &MissingCellsError{Root: root, Cells: missing}
	}
	cells, err := load(root)
	if err != nil {
		return nil, err
	}
	sels := map[string]*sweep.CMuSelection{}
	for _, c := range cells {
		if _, ok := sels[c.Task]; ok {
			continue
		}
		s, err := readSelection(root, c.Task)
		if err != nil {
			return nil, err
		}
		sels[c.Task] = s
	}
	t := build(cells, sels)
	t.Missing = missing
	attacks := o.Attacks
	if attacks == "" {
		attacks = root
	}
	reps, paths, err := loadDistinguish(attacks)
	if err != nil {
		return nil, fmt.Errorf("attack reports under %s: %w", attacks, err)
	}
	t.Distinguish = distinguishPoints(cells, reps, paths)
	if t.Learned, err = loadLearned(attacks, cells); err != nil {
		return nil, fmt.Errorf("attack reports under %s: %w", attacks, err)
	}
	if len(missing) > 0 {
		slog.Warn("a partial sweep: cells without report.json are left out of the tables", "dir", root, "missing", len(missing),
			"cells", MissingList(missing))
	}
	return t, nil
}

// MissingCell is a cell of a sweep's manifest without report.json.
type MissingCell struct {
	ID     string `json:"id"`     // its directory under the sweep's
	Status string `json:"status"` // its status in the manifest (sweep.CellFailed, ...)
}

func (c MissingCell) String() string { return c.ID + " (" + c.Status + ")" }

// MissingCellsError is the error of [Read] over a sweep whose manifest lists
// cells without report.json.
type MissingCellsError struct {
	Root  string
	Cells []MissingCell
}

func (e *MissingCellsError) Error() string {
	return fmt.Sprintf("report %s: %s without %s: %s; finish the sweep, or report the others as a partial sweep",
		e.Root, plural(len(e.Cells), "cell"), train.ReportFile, MissingList(e.Cells))
}

// MissingList names up to 10 of cells, each as "<id> (<status>)", then says
// how many more there are.
func MissingList(cells []MissingCell) string {
	const shown = 10
	names := make([]string, 0, shown+1)
	for i, c := range cells {
		if i == shown {
			names = append(names, fmt.Sprintf("and %d more", len(cells)-shown))
			break
		}
		names = append(names, c.String())
	}
	return strings.Join(names, ", ")
}

// missingCells lists the cells of root's manifest (sweep.ManifestFile)
// without report.json, in the manifest's order; without a manifest, those
// of a sweep in stages not finished yet (sweep.StagesFile: the grid then
// the main stage, with their planned status); none without either.
func missingCells(root string) ([]MissingCell, error) {
	type cell struct {
		ID     string `json:"id"`
		Status string `json:"status"`
	}
	var m struct {
		Cells []cell `json:"cells"` // sweep.json
		Grid  []cell `json:"grid"`  // stages.json
		Main  []cell `json:"main"`
	}
	path := filepath.Join(root, sweep.ManifestFile)
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		path = filepath.Join(root, sweep.StagesFile)
		b, err = os.ReadFile(path)
	}
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	var missing []MissingCell
	for _, c := range append(m.Cells, append(m.Grid, m.Main...)...) {
		if c.ID == "" {
			continue
		}
		if _, err := os.Stat(filepath.Join(root, c.ID, train.ReportFile)); errors.Is(err, fs.ErrNotExist) {
			missing = append(missing, MissingCell{ID: c.ID, Status: c.Status})
		}
	}
	return missing, nil
}
