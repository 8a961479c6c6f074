package sweep

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/nvdp-project/nvdp/option"
	"github.com/nvdp-project/nvdp/progress"
	"github.com/nvdp-project/nvdp/task"
	"github.com/nvdp-project/nvdp/train"
)

// CellSpec is what a cell runs: the pipeline options, with Train.Out the
// cell's directory and Train.Resume set when it has a checkpoint, and, for a
// task that reads [task.Data] such as the speech task, its data; see
// [RunCell]. In JSON, as on a [Subprocess] child's stdin, the pipeline
// options' fields are at the top level, beside "speech", the data's key
// since the speech task had it alone.
type CellSpec struct {
	train.PipelineOptions
	Data *task.Data `json:"speech,omitempty"`
	// prepared is the cell's training run as [Run] checked it before any
	// work (checkCells), nil when it did not; not in JSON: a Subprocess
	// child checks its cell itself.
	prepared task.Trainer
}

// RunCell runs a cell's pipeline, its task's [task.RunPipeline], with
// spec.Data; for the speech task that is the utility on test, as `nvdp run
// --task lid` does. A cell that [Run] prepared before any work runs as
// [task.RunPrepared], its training options not checked again. report, when
// not nil, receives the progress.
func RunCell(ctx context.Context, spec CellSpec, report progress.Func) (*train.Report, error) {
	if spec.prepared != nil {
		return task.RunPrepared(ctx, spec.prepared, spec.PipelineOptions, report)
	}
	t, err := task.Lookup(spec.Train.Task)
	if err != nil {
		return nil, err
	}
	// RunPipeline resolves (or, resuming, reads) the options.
	return task.RunPipeline(ctx, t, spec.PipelineOptions, spec.Data, report)
}

// checkCells checks, before any work, the options of the first cell of
// each task and variant (the others differ in lambda, seed and target
// only) as a new run's, with [task.Task.Prepare], which writes nothing: a
// GLUE cell's files (glue_dir, vocab) as a speech cell's corpus.
// It returns the runs it prepared by cell ID, which the cells' new runs in
// this process train with (RunCell), without checking them again; a cell
// whose directory holds a run ([train.ErrRunExists], checked last), done or
// to resume, has its options checked and is prepared by its run. Errors are
// the task's (*option.Error, naming data_dir, max_seconds, ...).
func checkCells(o *Options, cells []*Cell) (map[string]task.Trainer, error) {
	prepared := map[string]task.Trainer{}
	seen := map[[2]string]bool{}
	for _, c := range cells {
		t, err := task.Lookup(c.Task)
		if err != nil {
			return nil, err
		}
		if seen[[2]string{c.Task, c.Variant}] {
			continue
		}
		seen[[2]string{c.Task, c.Variant}] = true
		spec := cellOptions(o, c)
		tr, err := t.Prepare(spec.Train, spec.Data)
		switch {
		case errors.Is(err, train.ErrRunExists):
		case err != nil:
			return nil, err
		default:
			prepared[c.ID] = tr
		}
	}
	return prepared, nil
}

// Runner runs one cell, as [RunCell] with spec does, in this process or
// another. It must leave the cell either complete with its report.json or
// resumable, and return ctx.Err(), wrapped, when cancelled. With
// Options.Jobs > 1 it is called from several goroutines at once and must run
// each cell in its own process, as [Subprocess] does; see the package
// documentation, "Concurrency".
type Runner func(ctx context.Context, cell Cell, spec CellSpec) error

// inProcess runs the cells with RunCell in this process, one at a time
// (Options.validate); report receives their progress (nil: none).
func inProcess(report progress.Func) Runner {
	return func(ctx context.Context, cell Cell, spec CellSpec) error {
		_, err := RunCell(ctx, spec, report)
		return err
	}
}

// subprocessWaitDelay is how long a cancelled cell subprocess has to stop at
// its next step with a checkpoint after SIGINT before it is killed.
const subprocessWaitDelay = 5 * time.Minute

// Subprocess returns a [Runner] that runs each cell as the command argv, such
// as this binary's `nvdp sweep-cell`, with the environment env, see
// subprocessEnv, and the cell's [CellSpec] as JSON on stdin. The child
// reads it with [ReadCellOptions] and runs [RunCell]. The child's stdout and
// stderr are appended to logDir/<cell ID with / as _>.log.
//
// Cancelling ctx sends the child SIGINT, and kills it if it has not exited
// subprocessWaitDelay later. A failed child's error names its log and
// quotes the log's last line, which is the child's error.
func Subprocess(argv, env []string, logDir string) Runner {
	return func(ctx context.Context, cell Cell, po CellSpec) error {
		if len(argv) == 0 {
			return errors.New("sweep: Subprocess without a command")
		}
		if err := os.MkdirAll(logDir, 0o755); err != nil {
			return err
		}
		spec, err := json.Marshal(po)
		if err != nil {
			return fmt.Errorf("cell %s: options: %w", cell.ID, err)
		}
		logPath := filepath.Join(logDir, strings.ReplaceAll(cell.ID, string(filepath.Separator), "_")+".log")
		lf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		if err != nil {
			return err
		}
		defer lf.Close()
		fmt.Fprintf(lf, "=== %s cell %s (resume %v)\n", time.Now().UTC().Format(time.RFC3339), cell.ID, po.Train.Resume)
		c := exec.CommandContext(ctx, argv[0], argv[1:]...)
		c.Stdin = bytes.NewReader(spec)
		c.Env = env
		c.Stdout, c.Stderr = lf, lf
		c.Cancel = func() error { return c.Process.Signal(os.Interrupt) }
		c.WaitDelay = subprocessWaitDelay
		if err := c.Run(); err != nil {
			if ctx.Err() != nil {
				return fmt.Errorf("cell %s interrupted (log %s): %w", cell.ID, logPath, ctx.Err())
			}
			return fmt.Errorf("cell %s: %w (log %s: %s)", cell.ID, err, logPath, lastLine(logPath))
		}
		return nil
	}
}

// ReadCellOptions reads the cell that a [Subprocess] runner writes to the
// child's stdin: one JSON object of [CellSpec]. Unknown fields, as from a
// child binary older than the sweep's, and trailing data are errors.
func ReadCellOptions(r io.Reader) (CellSpec, error) {
	var po CellSpec
	dec := json.NewDecoder(r)
	dec.DisallowUnknownFields()
	if err := dec.Decode(&po); err != nil {
		return po, fmt.Errorf("cell options: %w", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return po, fmt.Errorf("cell options: data after the JSON object")
	}
	return po, nil
}

// subprocessEnv returns the environment of the cell subprocesses of a sweep
// with jobs cells at once on cpus cores. It is environ with
// OPENBLAS_NUM_THREADS and GOMAXPROCS set to cpus/jobs, at least 1, where
// environ does not set them, so that the cells share the cores instead of
// each spinning up a BLAS thread per core. Measured on 2 cores with
// bert-tiny, two one-thread cells finish about twice as many training steps
// per minute as one two-thread cell; see docs/results.md.
func subprocessEnv(environ []string, cpus, jobs int) []string {
	per := max(1, cpus/max(1, jobs))
	env := slices.Clone(environ)
	for _, k := range []string{"OPENBLAS_NUM_THREADS", "GOMAXPROCS"} {
		if !slices.ContainsFunc(env, func(e string) bool { return strings.HasPrefix(e, k+"=") }) {
			env = append(env, k+"="+strconv.Itoa(per))
		}
	}
	return env
}

// lastLine is the last non-empty line of a log file (the child's error).
func lastLine(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	return lines[len(lines)-1]
}

// SetRunner chooses how the cells of o run: with o.Jobs > 1 each as a
// [Subprocess] of this binary (os.Executable) with the arguments args, such
// as its hidden `sweep-cell` command, the environment subprocessEnv gives
// it and its log under Out/logs; else in this process, with progress to
// report (o.Progress and the audit's). Jobs < 1, or a binary that cannot be
// found, is an [*option.Error] naming jobs.
func (o *Options) SetRunner(args []string, report progress.Func) error {
	switch {
	case o.Jobs < 1:
		return option.Errorf("jobs", o.Jobs, "must be >= 1")
	case o.Jobs > 1:
		exe, err := os.Executable()
		if err != nil {
			return option.Errorf("jobs", nil, "cannot find this binary to run cells as subprocesses: %v", err)
		}
		o.Runner = Subprocess(append([]string{exe}, args...), subprocessEnv(os.Environ(), runtime.NumCPU(), o.Jobs), filepath.Join(o.Out, logDir))
	default:
		o.Progress = report
		o.Base.Audit.Progress = report
	}
	return nil
}
