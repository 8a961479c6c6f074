// Package loop is the training loop of nvdp's trainers: package train, which
// fine-tunes on a GLUE task, and package mlm, which pretrains a
// masked-language model. It owns what a run does besides computing a batch's
// gradients, so that both trainers do it the same way:
//
//   - the optimizer: AdamW with nn's constants, nn.AdamBeta1, nn.AdamBeta2
//     and eps nn.AdamEps or nn.BERTAdamEps; the linear warm-up and decay
//     schedule nn.LinearWarmupDecay; and global gradient-norm clipping. It
//     runs on the host, or on a device through Config.Device, as
//     dnn.DeviceOptimizer does;
//   - the data order: epochs of Examples/BatchSize batches, with drop_last,
//     each a slice of one permutation per epoch drawn from the trainer's
//     named stream of internal/rngstream;
//   - checkpoints, atomic, with nn.SaveCheckpoint: the parameters, AdamW
//     moments, the loop's [State], the trainer's own state and the states of
//     its random sources, so that a resumed run equals an uninterrupted one
//     bit for bit;
//   - resume: the checkpoint is restored and checked against the data, the
//     temporary files of a killed write are removed with
//     atomicfile.RemoveStale, and the metrics log of internal/jsonl is cut
//     back to the checkpoint;
//   - StopAfter, a resumable stop after a number of steps; cancellation, with
//     a final checkpoint and an [*Interrupted] error; and progress events,
//     through progress.Func.
//
// A trainer supplies, in [Config], the step, which computes the gradients of
// one batch; its evaluations, AfterStep and EndEpoch; and its own resumable
// state.
//
// The package is internal: it is the machinery of this module's trainers,
// not a stable API; train and mlm export what their callers need.
package loop

import (
	"context"
	"encoding"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/nvdp-project/nvdp/internal/atomicfile"
	"github.com/nvdp-project/nvdp/internal/jsonl"
	"github.com/nvdp-project/nvdp/nn"
	"github.com/nvdp-project/nvdp/progress"
)

// Errors of Check: a new run whose directory holds a checkpoint, a resume
// without one.
var (
	ErrRunExists    = errors.New("the directory already holds a run")
	ErrNoCheckpoint = errors.New("no checkpoint to resume from")
)

// Check reports whether a run may start or resume. Trainers call it before
// any other work. When resume is false no checkpoint may exist, or it
// returns [ErrRunExists]; when resume is true a checkpoint must exist, or it
// returns [ErrNoCheckpoint].
func Check(checkpoint string, resume bool) error {
	st, err := os.Stat(checkpoint)
	switch {
	case err != nil && !errors.Is(err, os.ErrNotExist):
		return err
	case resume && err != nil:
		return fmt.Errorf("%w: %s does not exist", ErrNoCheckpoint, checkpoint)
	case resume && !st.Mode().IsRegular():
		return fmt.Errorf("%w: %s is not a file", ErrNoCheckpoint, checkpoint)
	case !resume && err == nil:
		return fmt.Errorf("%s: %w (%s): resume it or choose another directory", filepath.Dir(checkpoint), ErrRunExists, filepath.Base(checkpoint))
	}
	return nil
}

// Interrupted is the error that [Run.Train] returns when its context is
// cancelled, by a signal or a caller's deadline. The run stopped before step
// Step+1 and its state at Step is in Checkpoint, so resuming continues it
// exactly. It unwraps to the context's error, context.Canceled or
// context.DeadlineExceeded, and to its cause, such as "terminated signal
// received".
type Interrupted struct {
	Step       int
	Checkpoint string
	Err, Cause error
}

func (e *Interrupted) Error() string {
	why := e.Err.Error()
	if e.Cause != nil && e.Cause != e.Err {
		why = e.Cause.Error()
	}
	return fmt.Sprintf("interrupted after step %d (%s); checkpoint %s written: resume the run to continue it", e.Step, why, e.Checkpoint)
}

func (e *Interrupted) Unwrap() []error {
	if e.Cause == nil {
		return []error{e.Err}
	}
	return []error{e.Err, e.Cause}
}

// State is the loop's resumable position, saved in every checkpoint. Its JSON
// names are those that train's checkpoints have always used.
type State struct {
	Epoch int `json:"epoch"` // 0-based epoch in progress; after the last epoch, the number of epochs
	Batch int `json:"batch"` // next batch of the epoch (Step = Epoch*batches per epoch + Batch)
	Step  int `json:"step"`  // optimizer steps taken
	// EpochSeconds is the wall time spent in the current epoch, Seconds that
	// of the whole run (every session), both up to the last hook call or
	// checkpoint.
	EpochSeconds float64 `json:"ep_secs"`
	Seconds      float64 `json:"secs"`
	// Lines is the number of lines logged to the metrics file (Run.Log); -1
	// when resumed from a checkpoint that predates the count.
	Lines   int  `json:"lines"`
	Done    bool `json:"done"`    // training finished: all steps, or stopped early
	Stopped bool `json:"stopped"` // stopped early by EndEpoch
}

// RNG is a random source whose state a checkpoint keeps, such as *rand.PCG
// or *rand.ChaCha8.
type RNG interface {
	encoding.BinaryMarshaler
	encoding.BinaryUnmarshaler
}

// Source names a random source of the trainer's steps for the checkpoint. Its
// state is saved under Key in the state object, and restored on resume.
type Source struct {
	Key string
	RNG RNG
}

// Device is an optimizer on an accelerator, such as dnn.DeviceOptimizer. The
// trained parameters live there with their gradients and AdamW moments, and
// the host's Params and AdamW hold the run's state only when pulled. Its
// methods are called from the loop's goroutine.
type Device interface {
	// ZeroGrads clears the gradients (before each Step).
	ZeroGrads() error
	// ClipAndStep clips the gradients' global L2 norm to clip (<= 0: no
	// clipping) and takes one AdamW step with learning rate lr (after each
	// Step), as nn.ClipGradNorm and nn.AdamW.Update do on the host; it
	// returns the norm before clipping.
	ClipAndStep(lr, clip float64) (gradNorm float64, err error)
	// Pull copies the parameters' values into the host Params and the
	// optimizer's step and moments into opt (before each checkpoint).
	Pull(opt *nn.AdamW) error
	// Push copies the host Params' values to the device and the state of opt
	// (hyperparameters, step, moments) into the device optimizer (at Open,
	// after a resume restored them).
	Push(opt *nn.AdamW) error
}

// Config describes a run to Open.
type Config struct {
	// Stage names the run in progress events ("train", "pretrain").
	Stage string
	// Checkpoint is the checkpoint file; its directory is the run's.
	// StateKey is the checkpoint metadata key of the state object (the
	// loop's State, the trainer's State and its Sources, as one JSON object).
	Checkpoint, StateKey string
	// Metrics is the run's JSON-lines metrics log: every line has a "step"
	// (the optimizer steps taken when it was written). LineUnit is what one
	// line records, for errors ("epoch"; default "line").
	Metrics, LineUnit string

	// Params are trained by AdamW with learning rate LR (peak of the linear
	// schedule: Warmup steps up, then down to 0 at Steps), decoupled
	// WeightDecay and Eps (nn.AdamEps or nn.BERTAdamEps), after their
	// global gradient norm is clipped to GradClip (<= 0: no clipping).
	Params               []*nn.Param
	LR, WeightDecay, Eps float64
	Warmup, Steps        int
	GradClip             float64
	Examples, BatchSize  int                        // an epoch is Examples/BatchSize batches (drop_last)
	Order                func(epoch int) *rand.Rand // the data order of an epoch: Order(e).Perm(Examples)
	Sources              []Source
	CheckpointEvery      int  // also checkpoint every K steps (0: only at epoch ends, stops and the end)
	CheckpointEpochs     bool // checkpoint at every epoch end
	StopAfter            int  // stop, resumable, once Step >= StopAfter (0: never)
	Resume               bool // continue from Checkpoint (else start afresh)
	Progress             progress.Func

	// Device, when set, clears, clips and applies the gradients instead of
	// the host (nn.ZeroGrads, nn.ClipGradNorm, AdamW.Update on Params): Open
	// pushes the host state to it (the restored one on a resume), every
	// checkpoint pulls the state back first, and Step computes the gradients
	// on the device. Nil: everything on the host.
	Device Device

	// Step computes the loss of the examples idx (a slice of the epoch's
	// permutation) and accumulates their gradients into Params (zeroed
	// before; the loop clips and applies them after). st.Step steps precede
	// it; lr is its learning rate. It returns the loss for the progress
	// events and a short detail ("task 0.41 L_G 2.1").
	Step func(st *State, idx []int, lr float64) (loss float64, detail string, err error)
	// AfterStep, when set, runs after every optimizer step (st.Step counts
	// it); final is true on the last step of the session (Steps reached, or
	// StopAfter): e.g. a periodic evaluation and metrics line.
	AfterStep func(st *State, final bool) error
	// EndEpoch, when set, runs after the last batch of epoch st.Epoch (before
	// it advances); stop ends the training early (State.Stopped).
	EndEpoch func(st *State) (stop bool, err error)
	// State, when set, is a pointer to the trainer's own resumable state: a
	// struct whose JSON object is merged into the checkpoint's state object
	// (its keys must differ from the loop's and the Sources').
	State any
	// Saved, when set, runs after each checkpoint (e.g. exporting the model).
	Saved func() error
	// Legacy, when set, converts the metadata of a checkpoint that has no
	// StateKey (written before the loop existed) into the state object.
	Legacy func(meta map[string]string) (map[string]any, error)
}

// Run is an open run: its optimizer and State. Open it, do the run's own
// set-up (files of a fresh run, a first evaluation), then Train.
type Run struct {
	cfg       Config
	st        State
	opt       *nn.AdamW
	perEpoch  int
	prevSecs  float64   // Seconds of earlier sessions
	start     time.Time // of this session
	epochFrom time.Time // of the current epoch (shifted back by its time before a resume)
	savedStep int       // step of the checkpoint on disk (-1: none)
	savedDone bool
}

// Open prepares a run.
//
// For a resume it restores the parameters, the AdamW state, the [State], the
// trainer's state and the random sources from the checkpoint, and checks the
// position against the data. It removes the temporary files that a killed
// write left in the directory, and cuts the metrics log back to the
// checkpoint: a torn last line goes, and a log that lost lines the
// checkpoint counted is an error naming them.
//
// For a fresh run it removes such temporary files and any old metrics log.
//
// Its errors name the file.
func Open(cfg Config) (*Run, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	r := &Run{cfg: cfg, perEpoch: cfg.Examples / cfg.BatchSize, start: time.Now(), savedStep: -1,
		opt: nn.NewAdamW(cfg.LR, nn.AdamBeta1, nn.AdamBeta2, cfg.Eps, cfg.WeightDecay)}
	if _, err := r.marshal(); err != nil { // a key collision is a programmer error: fail before any work
		return nil, err
	}
	dir := filepath.Dir(cfg.Checkpoint)
	if cfg.Resume {
		if err := r.load(); err != nil {
			return nil, err
		}
		r.savedStep, r.savedDone = r.st.Step, r.st.Done
		r.st.Done = r.finished() // a finished pretraining run resumed with more steps goes on
	}
	if stale, err := atomicfile.RemoveStale(dir); err != nil {
		return nil, err
	} else if len(stale) > 0 {
		slog.Warn("removed the temporary files of an interrupted write", "files", stale)
	}
	if cfg.Resume {
		if err := truncate(cfg.Metrics, r.st.Step, r.st.Lines, cfg.LineUnit); err != nil {
			return nil, err
		}
	} else if err := os.Remove(cfg.Metrics); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, err
	}
	if cfg.Device != nil {
		if err := cfg.Device.Push(r.opt); err != nil {
			return nil, fmt.Errorf("the device optimizer: %w", err)
		}
	}
	r.prevSecs = r.st.Seconds
	r.epochFrom = time.Now().Add(-time.Duration(r.st.EpochSeconds * float64(time.Second)))
	return r, nil
}

func (c *Config) validate() error {
	bad := func(v float64) bool { return math.IsNaN(v) || math.IsInf(v, 0) }
	switch {
	case c.Step == nil || c.Order == nil:
		return errors.New("loop: Config needs Step and Order")
	case c.Checkpoint == "" || c.StateKey == "" || c.Metrics == "":
		return errors.New("loop: Config needs Checkpoint, StateKey and Metrics")
	case c.BatchSize < 1 || c.Examples < c.BatchSize:
		return fmt.Errorf("%d training examples make no batch of %d", c.Examples, c.BatchSize)
	case c.Steps < 0 || c.Warmup < 0 || c.StopAfter < 0 || c.CheckpointEvery < 0:
		return fmt.Errorf("loop: negative count (steps %d, warm-up %d, stop after %d, checkpoint every %d)", c.Steps, c.Warmup, c.StopAfter, c.CheckpointEvery)
	case !(c.LR > 0) || bad(c.LR):
		return fmt.Errorf("learning rate %v: must be a finite number > 0", c.LR)
	case !(c.Eps > 0) || bad(c.Eps):
		return fmt.Errorf("AdamW eps %v: must be a finite number > 0", c.Eps)
	case c.WeightDecay < 0 || bad(c.WeightDecay):
		return fmt.Errorf("weight decay %v: must be a finite number >= 0", c.WeightDecay)
	case math.IsNaN(c.GradClip):
		return errors.New("gradient clipping bound is NaN")
	}
	return nil
}

// State is the run's position; hooks may read it, not change it.
func (r *Run) State() *State { return &r.st }

// Optimizer returns the run's AdamW, for inspection; the loop applies it.
// With a [Device], it holds the state of the last Pull.
func (r *Run) Optimizer() *nn.AdamW { return r.opt }

// CheckpointStep is the step of the checkpoint on disk: the last one this
// session wrote or, before that, the one it resumed from; -1 when there is
// none. After an error of Train it is the state a resume continues from.
func (r *Run) CheckpointStep() int { return r.savedStep }

// Pull brings the host Params and Optimizer up to the Device's state (e.g.
// before a hook evaluates on the host); without a Device it does nothing.
func (r *Run) Pull() error {
	if r.cfg.Device == nil {
		return nil
	}
	if err := r.cfg.Device.Pull(r.opt); err != nil {
		return fmt.Errorf("the device optimizer: %w", err)
	}
	return nil
}

// Log appends v to the metrics log as one line, whole and synced, with
// [jsonl.Append], and counts it in State.Lines. v must marshal to an object
// with the "step" it was written at.
func (r *Run) Log(v any) error {
	if err := jsonl.Append(r.cfg.Metrics, v); err != nil {
		return err
	}
	if r.st.Lines >= 0 {
		r.st.Lines++
	}
	return nil
}

// Train runs the steps left. It stops when Steps are done or EndEpoch stops
// early, with State.Done set and a final checkpoint; or at StopAfter, with
// State.Done false, a checkpoint and a nil error. Cancelling ctx stops it
// before the next step, with a checkpoint and an [*Interrupted] error. A
// step's error is returned with its epoch and step, and the checkpoint then
// stays at the last one written.
func (r *Run) Train(ctx context.Context) error {
	cfg, st := &r.cfg, &r.st
	r.report(math.NaN(), "")
	var perm []int
	permEpoch := -1
	for !r.finished() {
		if cfg.StopAfter > 0 && st.Step >= cfg.StopAfter {
			return r.save()
		}
		if err := ctx.Err(); err != nil {
			if serr := r.save(); serr != nil {
				return errors.Join(err, serr)
			}
			return &Interrupted{Step: st.Step, Checkpoint: cfg.Checkpoint, Err: err, Cause: context.Cause(ctx)}
		}
		if permEpoch != st.Epoch {
			perm, permEpoch = cfg.Order(st.Epoch).Perm(cfg.Examples), st.Epoch
		}
		idx := perm[st.Batch*cfg.BatchSize : (st.Batch+1)*cfg.BatchSize]
		lr := cfg.LR * nn.LinearWarmupDecay(st.Step, cfg.Warmup, cfg.Steps)
		if cfg.Device == nil {
			nn.ZeroGrads(cfg.Params)
		} else if err := cfg.Device.ZeroGrads(); err != nil {
			return fmt.Errorf("epoch %d step %d: the device optimizer: %w", st.Epoch+1, st.Step+1, err)
		}
		loss, detail, err := cfg.Step(st, idx, lr)
		if err != nil {
			return fmt.Errorf("epoch %d step %d: %w", st.Epoch+1, st.Step+1, err)
		}
		if cfg.Device == nil {
			nn.ClipGradNorm(cfg.Params, cfg.GradClip)
			r.opt.Update(cfg.Params, lr)
		} else if _, err := cfg.Device.ClipAndStep(lr, cfg.GradClip); err != nil {
			return fmt.Errorf("epoch %d step %d: the device optimizer: %w", st.Epoch+1, st.Step+1, err)
		}
		st.Step++
		st.Batch++
		r.report(loss, detail)
		if cfg.AfterStep != nil {
			r.touch()
			if err := cfg.AfterStep(st, st.Step >= cfg.Steps || (cfg.StopAfter > 0 && st.Step >= cfg.StopAfter)); err != nil {
				return fmt.Errorf("step %d: %w", st.Step, err)
			}
		}
		if st.Batch == r.perEpoch {
			if cfg.EndEpoch != nil {
				r.touch()
				stop, err := cfg.EndEpoch(st)
				if err != nil {
					return fmt.Errorf("epoch %d: %w", st.Epoch+1, err)
				}
				st.Stopped = stop
			}
			st.Epoch++
			st.Batch, st.EpochSeconds, r.epochFrom = 0, 0, time.Now()
			if cfg.CheckpointEpochs && !r.finished() {
				if err := r.save(); err != nil {
					return err
				}
				continue
			}
		}
		if cfg.CheckpointEvery > 0 && st.Step%cfg.CheckpointEvery == 0 && !r.finished() {
			if err := r.save(); err != nil {
				return err
			}
		}
	}
	st.Done = true
	if err := r.save(); err != nil {
		return err
	}
	if d := int64(st.Step); d < int64(cfg.Steps) { // stopped early: the stage ends here
		cfg.Progress.Report(progress.Event{Stage: cfg.Stage, Unit: "steps", Done: d, Total: d, Loss: math.NaN(), Detail: "stopped early"})
	}
	return nil
}

func (r *Run) finished() bool { return r.st.Stopped || r.st.Step >= r.cfg.Steps }

// EpochSeconds returns the wall time spent in the current epoch so far, over
// every session.
func (r *Run) EpochSeconds() float64 { return time.Since(r.epochFrom).Seconds() }

// Seconds returns the wall time of the run so far, over every session.
func (r *Run) Seconds() float64 { return r.prevSecs + time.Since(r.start).Seconds() }

// touch brings the wall times of the State up to now.
func (r *Run) touch() { r.st.Seconds, r.st.EpochSeconds = r.Seconds(), r.EpochSeconds() }

// report sends the progress event of the step just taken (loss NaN: the
// position at the start of a session).
func (r *Run) report(loss float64, detail string) {
	if r.cfg.Progress == nil {
		return
	}
	epochs := (r.cfg.Steps + r.perEpoch - 1) / r.perEpoch
	epoch := min(r.st.Epoch+1, max(epochs, 1))
	d := fmt.Sprintf("epoch %d/%d", epoch, epochs)
	if detail != "" {
		d += " " + detail
	}
	r.cfg.Progress(progress.Event{Stage: r.cfg.Stage, Unit: "steps", Done: int64(r.st.Step), Total: int64(r.cfg.Steps), Loss: loss, Detail: d})
}

// save writes the checkpoint (unless the one on disk already holds this
// state) and runs Saved.
func (r *Run) save() error {
	if r.savedStep == r.st.Step && r.savedDone == r.st.Done {
		return nil
	}
	r.touch()
	state, err := r.marshal()
	if err != nil {
		return err
	}
	if err := r.Pull(); err != nil {
		return err
	}
	if err := nn.SaveCheckpoint(r.cfg.Checkpoint, r.cfg.Params, r.opt, map[string]string{r.cfg.StateKey: state}); err != nil {
		return err
	}
	r.savedStep, r.savedDone = r.st.Step, r.st.Done
	if r.cfg.Saved != nil {
		return r.cfg.Saved()
	}
	return nil
}

// marshal is the state object: the loop's State, the trainer's State and the
// Sources' states, merged into one JSON object.
func (r *Run) marshal() (string, error) {
	obj := map[string]json.RawMessage{}
	merge := func(v any) error {
		b, err := json.Marshal(v)
		if err != nil {
			return fmt.Errorf("checkpoint state: %w", err)
		}
		var m map[string]json.RawMessage
		if err := json.Unmarshal(b, &m); err != nil {
			return fmt.Errorf("checkpoint state: %T is not a JSON object: %w", v, err)
		}
		for k, x := range m {
			if _, dup := obj[k]; dup {
				return fmt.Errorf("checkpoint state: key %q twice", k)
			}
			obj[k] = x
		}
		return nil
	}
	if err := merge(r.st); err != nil {
		return "", err
	}
	if r.cfg.State != nil {
		if err := merge(r.cfg.State); err != nil {
			return "", err
		}
	}
	rngs := map[string]string{}
	for _, s := range r.cfg.Sources {
		enc, err := nn.RNGState(s.RNG)
		if err != nil {
			return "", fmt.Errorf("checkpoint state %s: %w", s.Key, err)
		}
		rngs[s.Key] = enc
	}
	if err := merge(rngs); err != nil {
		return "", err
	}
	b, err := json.Marshal(obj)
	return string(b), err
}

// load restores the checkpoint into the parameters, the optimizer, the State,
// the trainer's state and the sources, and checks the position.
func (r *Run) load() error {
	cfg := &r.cfg
	meta, err := nn.LoadCheckpoint(cfg.Checkpoint, cfg.Params, r.opt)
	if err != nil {
		return err
	}
	fail := func(format string, a ...any) error {
		return fmt.Errorf("checkpoint %s: %s", cfg.Checkpoint, fmt.Sprintf(format, a...))
	}
	raw, ok := meta[cfg.StateKey]
	if !ok {
		if cfg.Legacy == nil {
			return fail("no %s in the metadata", cfg.StateKey)
		}
		obj, err := cfg.Legacy(meta)
		if err != nil {
			return fail("%v", err)
		}
		b, err := json.Marshal(obj)
		if err != nil {
			return fail("%v", err)
		}
		raw = string(b)
	}
	var obj map[string]json.RawMessage
	aux := struct {
		State
		Lines *int `json:"lines"`
	}{}
	if err := json.Unmarshal([]byte(raw), &obj); err != nil {
		return fail("%s: %v", cfg.StateKey, err)
	}
	if err := json.Unmarshal([]byte(raw), &aux); err != nil {
		return fail("%s: %v", cfg.StateKey, err)
	}
	r.st = aux.State
	r.st.Lines = -1
	if aux.Lines != nil {
		r.st.Lines = *aux.Lines
	}
	if cfg.State != nil {
		if err := json.Unmarshal([]byte(raw), cfg.State); err != nil {
			return fail("%s: %v", cfg.StateKey, err)
		}
	}
	for _, s := range cfg.Sources {
		var enc string
		if x, ok := obj[s.Key]; !ok {
			return fail("no random state %q", s.Key)
		} else if err := json.Unmarshal(x, &enc); err != nil {
			return fail("random state %q: %v", s.Key, err)
		}
		if err := nn.RestoreRNG(enc, s.RNG); err != nil {
			return fail("random state %q: %v", s.Key, err)
		}
	}
	st := r.st
	switch {
	case st.Step < 0 || st.Epoch < 0 || st.Batch < 0 || st.Seconds < 0 || st.EpochSeconds < 0:
		return fail("negative position or time in %+v", st)
	case st.Batch >= r.perEpoch || st.Step != st.Epoch*r.perEpoch+st.Batch:
		return fail("position epoch %d, batch %d, step %d does not fit %d training examples in batches of %d (%d per epoch): "+
			"the training data changed since the checkpoint", st.Epoch+1, st.Batch, st.Step, cfg.Examples, cfg.BatchSize, r.perEpoch)
	case r.opt.Step != st.Step:
		return fail("AdamW has taken %d steps, the loop %d", r.opt.Step, st.Step)
	}
	return nil
}

// truncate cuts the metrics log back to the checkpoint at step: it keeps the
// complete lines written at or before it (a torn last line goes too,
// atomically) and checks that they are the lines the checkpoint counted
// (lines >= 0): a log emptied or cut (by hand, or by a crash that lost data
// never synced) has lost history that a resume cannot recompute.
func truncate(path string, step, lines int, unit string) error {
	if unit == "" {
		unit = "line"
	}
	kept, err := jsonl.Truncate(path, func(_ int, b []byte) (bool, error) {
		var l struct {
			Step *int `json:"step"`
		}
		if err := json.Unmarshal(b, &l); err != nil {
			return false, err
		}
		if l.Step == nil {
			return false, errors.New(`no "step"`)
		}
		return *l.Step <= step, nil
	})
	switch {
	case err != nil:
		return err
	case lines < 0 || kept == lines:
		return nil
	case kept > lines:
		return fmt.Errorf("%s: %d lines up to step %d, but the checkpoint counted %d: the file is not this run's history", path, kept, step, lines)
	}
	missing := make([]string, 0, lines-kept)
	for i := kept + 1; i <= lines; i++ {
		missing = append(missing, fmt.Sprint(i))
	}
	return fmt.Errorf("%s: the checkpoint follows %d %s(s) but the file has no line for %s(s) %s: "+
		"the training history is lost and cannot be recomputed; start a new run in another directory",
		path, lines, unit, unit, strings.Join(missing, ", "))
}
