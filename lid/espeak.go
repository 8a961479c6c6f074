package lid

import (
	"log/slog"

	"github.com/nvdp-project/nvdp/option"
	"github.com/nvdp-project/nvdp/progress"
)

// SynthesizeEspeak renders the synthetic corpus into root with espeak-ng
// and the Debian word lists that [ReadWords] reads. binary is the program;
// "" means espeak-ng on the PATH. It checks o, asks the program for its
// version, which the corpus records, logs what it renders, runs
// [Synthesize] and logs what it wrote. p receives Synthesize's progress.
//
// Errors: an [*option.Error] naming out for an empty root, espeak for a
// program that does not run, with where to get it, or the option of o that
// [SynthOptions.Validate] refuses; those of Synthesize.
func SynthesizeEspeak(root string, o SynthOptions, binary string, p progress.Func) (*SynthInfo, error) {
	if root == "" {
		return nil, option.Errorf("out", nil, "required")
	}
	if err := o.Validate(); err != nil {
		return nil, err
	}
	r := Espeak{Binary: binary}
	version, err := r.Version()
	if err != nil {
		return nil, &option.Error{Option: "espeak", Reason: err.Error() + " (scripts/make-lid-corpus.sh installs espeak-ng)", Err: err}
	}
	slog.Info("lidcorpus", "out", root, "renderer", version, "train", o.Train, "dev", o.Dev, "test", o.Test, "seed", o.Seed)
	info, err := Synthesize(root, o, r, version, ReadWords, p)
	if err != nil {
		return nil, err
	}
	slog.Info("lidcorpus done", "out", root, "languages", len(info.Languages), "missing", len(info.Missing), "utterances", info.NumUtterances())
	return info, nil
}
