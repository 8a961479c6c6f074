package main

import (
	"fmt"
	"io"
	"log/slog"
	"math"
	"os"
	"sync"
	"time"

	"github.com/nvdp-project/nvdp/progress"
	"github.com/schollz/progressbar/v3"
	"github.com/spf13/cobra"
	"golang.org/x/term"
)

// progressLogEvery is how often a long operation logs a progress line when
// no bar is drawn (stderr not a terminal, or --no-progress).
var progressLogEvery = 30 * time.Second

// newProgress is the only place that decides how progress is shown: a bar
// per stage on stderr when it is a terminal and --no-progress is not set,
// else a slog line per stage about every progressLogEvery (and when a stage
// ends) with the count, the rate, the ETA and, for training, the mean loss
// since the previous line.
func newProgress(cmd *cobra.Command, noProgress bool) progress.Func {
	w := cmd.ErrOrStderr()
	if f, ok := w.(*os.File); ok && !noProgress && term.IsTerminal(int(f.Fd())) {
		return barProgress(w)
	}
	return logProgress(slog.Default(), progressLogEvery)
}

// barProgress draws one progressbar per stage on w.
func barProgress(w io.Writer) progress.Func {
	var mu sync.Mutex
	var bar *progressbar.ProgressBar
	stage := ""
	return func(e progress.Event) {
		mu.Lock()
		defer mu.Unlock()
		if bar == nil || e.Stage != stage {
			if bar != nil {
				_ = bar.Finish()
			}
			stage = e.Stage
			total := e.Total
			if total <= 0 {
				total = -1 // spinner
			}
			opts := []progressbar.Option{progressbar.OptionSetWriter(w), progressbar.OptionSetDescription(e.Stage),
				progressbar.OptionShowCount(), progressbar.OptionShowIts(), progressbar.OptionSetPredictTime(true),
				progressbar.OptionThrottle(250 * time.Millisecond), progressbar.OptionFullWidth(),
				progressbar.OptionOnCompletion(func() { fmt.Fprintln(w) })}
			if e.Unit == "bytes" {
				opts = append(opts, progressbar.OptionShowBytes(true))
			} else if e.Unit != "" {
				opts = append(opts, progressbar.OptionSetItsString(e.Unit))
			}
			bar = progressbar.NewOptions64(total, opts...)
		}
		desc := e.Stage
		if e.Detail != "" {
			desc += " " + e.Detail
		}
		if e.HasLoss() {
			desc += fmt.Sprintf(" loss %.4f", e.Loss)
		}
		bar.Describe(desc)
		_ = bar.Set64(e.Done)
	}
}

// logProgress logs, per stage, a line at most every `every` and one when the
// stage ends: stage, done, total, unit, rate per second, ETA and the mean of
// the losses reported since the previous line.
func logProgress(l *slog.Logger, every time.Duration) progress.Func {
	type state struct {
		last     time.Time
		lastDone int64
		loss     float64
		n        int
	}
	var mu sync.Mutex
	states := map[string]*state{}
	return func(e progress.Event) {
		mu.Lock()
		defer mu.Unlock()
		s, ok := states[e.Stage]
		if !ok {
			s = &state{last: time.Now(), lastDone: e.Done}
			states[e.Stage] = s
			if e.Total <= 0 || e.Done < e.Total {
				return // the start of a stage is not progress yet
			}
		}
		if e.HasLoss() {
			s.loss += e.Loss
			s.n++
		}
		end := e.Total > 0 && e.Done >= e.Total
		since := time.Since(s.last)
		if since < every && !end {
			return
		}
		attrs := []any{"stage", e.Stage, "done", e.Done}
		if e.Total > 0 {
			attrs = append(attrs, "of", e.Total)
		}
		if e.Unit != "" {
			attrs = append(attrs, "unit", e.Unit)
		}
		if e.Detail != "" {
			attrs = append(attrs, "detail", e.Detail)
		}
		if s.n > 0 {
			attrs = append(attrs, "loss", s.loss/float64(s.n))
		}
		if rate := float64(e.Done-s.lastDone) / since.Seconds(); since > 0 && rate > 0 && !math.IsInf(rate, 0) {
			attrs = append(attrs, "per_s", math.Round(rate*100)/100)
			if e.Total > 0 {
				eta := time.Duration(float64(e.Total-e.Done) / rate * float64(time.Second)).Round(time.Second)
				attrs = append(attrs, "eta", eta.String())
			}
		}
		l.Info("progress", attrs...)
		s.last, s.lastDone, s.loss, s.n = time.Now(), e.Done, 0, 0
		if end {
			delete(states, e.Stage)
		}
	}
}
