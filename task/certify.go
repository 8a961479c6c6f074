package task

import (
	"github.com/nvdp-project/nvdp/option"
	"github.com/nvdp-project/nvdp/privacy"
	"github.com/nvdp-project/nvdp/train"
)

// ModelClipSet returns the clip set of the model in the directory dir
// ([ModelDir.ClipSet]) for a certificate of its release, as `nvdp certify
// --model` takes it, and sets o's Model, Variant, Mode and Source to the
// model's. The model's own constants are certified, so none of
// [privacy.ClipSetConstants] may be given explicitly (given; nil: none).
//
// Errors: [privacy.NoConstantsGiven]'s, before the model is read; an
// [*option.Error] naming model (a directory that is not a model, or a
// model without an NVIB posterior such as the baseline, the cause kept).
func ModelClipSet(dir string, given option.Given, o *privacy.ClipSetOptions) (privacy.ClipSet, error) {
	if err := privacy.NoConstantsGiven(given); err != nil {
		return privacy.ClipSet{}, err
	}
	m, err := Open(dir)
	if err != nil {
		return privacy.ClipSet{}, option.Wrap("model", err)
	}
	set, cfg, err := m.ClipSet()
	if err != nil {
		return set, option.Wrap("model", err)
	}
	o.Model, o.Variant, o.Mode, o.Source = dir, cfg.Model, string(cfg.Mode), train.ModelSource(dir)
	return set, nil
}
