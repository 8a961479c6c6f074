package sweep

import (
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/nvdp-project/nvdp/internal/atomicfile"
)

// ManifestFile is Out/sweep.json, the [Manifest]: every cell with its
// status, rewritten atomically at every change.
const ManifestFile = "sweep.json"

// Manifest is Out/sweep.json. Run writes it. A sweep resumes from the cell
// directories, not from the manifest; report reads only each cell's id and
// status from it, to name the cells that have no report.json.
type Manifest struct {
	Out      string    `json:"out"`
	Tasks    []string  `json:"tasks"`
	Variants []string  `json:"variants"`
	Lambdas  []float64 `json:"lambdas"`
	Seeds    []uint64  `json:"seeds"`
	CMuGrid  []float64 `json:"c_mu_grid,omitempty"`
	// TargetEpsilons are the certified epsilons the nvdp-clipped and gaussian cells are calibrated to.
	TargetEpsilons []float64                `json:"target_epsilons,omitempty"`
	Selections     map[string]*CMuSelection `json:"c_mu_selections,omitempty"`
	Started        time.Time                `json:"started"`
	Updated        time.Time                `json:"updated"`
	Counts         map[string]int           `json:"counts"` // cells by status
	Cells          []*Cell                  `json:"cells"`
}

// manifest is the Manifest the workers share: every change goes through
// update, which writes the file.
type manifest struct {
	mu   sync.Mutex
	m    *Manifest
	path string
}

// CountsText writes the manifest's counts of cells by status, such as "3
// done, 1 failed", in the order done, running, pending, interrupted, failed
// and skipped, leaving out those with no cell.
func (m *Manifest) CountsText() string {
	var s []string
	for _, k := range []string{CellDone, CellRunning, CellPending, CellInterrupted, CellFailed, CellSkipped} {
		if m.Counts[k] > 0 {
			s = append(s, fmt.Sprintf("%d %s", m.Counts[k], k))
		}
	}
	return strings.Join(s, ", ")
}

func newManifest(o *Options, cells []*Cell) *manifest {
	return &manifest{path: filepath.Join(o.Out, ManifestFile), m: &Manifest{Out: o.Out, Tasks: o.Tasks, Variants: o.Variants,
		Lambdas: o.Lambdas, Seeds: o.Seeds, CMuGrid: o.CMuGrid, TargetEpsilons: o.TargetEpsilons, Started: time.Now().UTC(),
		Selections: map[string]*CMuSelection{}, Cells: cells}}
}

// update applies f to the manifest and writes it.
func (s *manifest) update(f func(m *Manifest)) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	f(s.m)
	s.m.Updated = time.Now().UTC()
	s.m.Counts = map[string]int{}
	for _, c := range s.m.Cells {
		s.m.Counts[c.Status]++
	}
	if err := atomicfile.WriteJSON(s.path, s.m); err != nil {
		return fmt.Errorf("sweep manifest: %w", err)
	}
	return nil
}

// set applies f to the cell c of the manifest and writes it.
func (s *manifest) set(c *Cell, f func(c *Cell)) error {
	return s.update(func(*Manifest) { f(c) })
}

// fail marks c failed with err and returns err.
func (s *manifest) fail(c *Cell, err error) error {
	_ = s.set(c, func(c *Cell) { c.Status, c.Error = CellFailed, err.Error() })
	return err
}

// doneGridCell is the finished grid cell that is the same run as the
// nvdp-clipped cell c (same task, lambda, seed and C_mu), or nil.
func (s *manifest) doneGridCell(c *Cell) *Cell {
	s.mu.Lock()
	defer s.mu.Unlock()
	var g *Cell
	for _, x := range s.m.Cells {
		if x.Grid && x.Status == CellDone && x.Task == c.Task && x.Lambda == c.Lambda && x.Seed == c.Seed && x.CMu == c.CMu {
			g = x
		}
	}
	return g
}
