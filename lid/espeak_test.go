package lid

import (
	"errors"
	"io/fs"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nvdp-project/nvdp/option"
)

// TestSynthesizeEspeakChecks: the output, the options and the program
// are checked in that order before anything is rendered, each error
// naming its option; a program that does not run says where to get one.
func TestSynthesizeEspeakChecks(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "no-espeak")
	bad := DefaultSynthOptions()
	bad.MinWords = 0
	out := filepath.Join(t.TempDir(), "corpus")
	for _, tc := range []struct {
		name, root, binary, option, want string
		o                                SynthOptions
	}{
		{"no out", "", missing, "out", "out: required", DefaultSynthOptions()},
		{"options before the program", out, missing, "min_words", "min_words 0", bad},
		{"no program", out, missing, "espeak", "(scripts/make-lid-corpus.sh installs espeak-ng)", DefaultSynthOptions()},
	} {
		_, err := SynthesizeEspeak(tc.root, tc.o, tc.binary, nil)
		var oe *option.Error
		if !errors.As(err, &oe) || oe.Option != tc.option || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an option error naming %s with %q", tc.name, err, tc.option, tc.want)
		}
		if tc.option == "espeak" && !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("%s: the cause is lost: %v", tc.name, err)
		}
	}
}
