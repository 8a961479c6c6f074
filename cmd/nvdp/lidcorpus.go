package main

import (
	"strings"

	"github.com/nvdp-project/nvdp/lid"
	"github.com/spf13/cobra"
)

// newLIDCorpusCmd is `nvdp lidcorpus`: the synthetic stand-in of
// CommonLanguage (lid.SynthesizeEspeak; scripts/make-lid-corpus.sh installs
// espeak-ng and the word lists and calls it).
func newLIDCorpusCmd() *cobra.Command {
	var (
		out, langs, espeak string
		noProgress, list   bool
	)
	o := lid.DefaultSynthOptions()
	cmd := &cobra.Command{
		Use:   "lidcorpus --out DIR",
		Short: "Render the synthetic stand-in of CommonLanguage with espeak-ng (NOT CommonLanguage)",
		Long: `lidcorpus renders a synthetic language-identification corpus in CommonLanguage's layout
(docs/speech.md, "Data"): the CommonLanguage languages espeak-ng speaks, sentences drawn from
Debian word lists, several voices, speeds and pitches per language, 16 kHz mono WAV, a
train/dev/test split sharing no sentence and no voice. It is a stand-in, never CommonLanguage:
its README.md and SYNTHETIC.json say so. scripts/make-lid-corpus.sh installs what it needs.
--list prints the language table (voice, word list) and exits.`,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if list {
				return lid.WriteStandIns(cmd.OutOrStdout())
			}
			if langs != "" {
				o.Languages = strings.Split(langs, ",")
			}
			_, err := lid.SynthesizeEspeak(out, o, espeak, newProgress(cmd, noProgress))
			return flagError(err)
		},
	}
	f := cmd.Flags()
	f.StringVar(&out, "out", "", "corpus folder to create (must not exist or be empty)")
	f.Uint64Var(&o.Seed, "seed", o.Seed, "seed of sentences, voices, speeds and pitches")
	f.IntVar(&o.Train, "train", o.Train, "utterances per language in train")
	f.IntVar(&o.Dev, "dev", o.Dev, "utterances per language in dev")
	f.IntVar(&o.Test, "test", o.Test, "utterances per language in test")
	f.IntVar(&o.MinWords, "min-words", o.MinWords, "fewest words per sentence")
	f.IntVar(&o.MaxWords, "max-words", o.MaxWords, "most words per sentence")
	f.IntVar(&o.MinSpeed, "min-speed", o.MinSpeed, "lowest espeak-ng speed (-s, words per minute)")
	f.IntVar(&o.MaxSpeed, "max-speed", o.MaxSpeed, "highest espeak-ng speed")
	f.IntVar(&o.MinPitch, "min-pitch", o.MinPitch, "lowest espeak-ng pitch (-p, 0 to 99)")
	f.IntVar(&o.MaxPitch, "max-pitch", o.MaxPitch, "highest espeak-ng pitch")
	f.StringVar(&langs, "languages", "", "comma-separated CommonLanguage names (default: every language with a voice)")
	f.StringVar(&espeak, "espeak", "espeak-ng", "the espeak-ng program")
	f.BoolVar(&list, "list", false, "print the language table and exit")
	f.BoolVar(&noProgress, "no-progress", false, "no progress bar on stderr (there is none when stderr is not a terminal)")
	return cmd
}
