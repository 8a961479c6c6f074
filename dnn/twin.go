package dnn

import (
	"fmt"

	"github.com/nvdp-project/nvdp/cuda"
	"github.com/nvdp-project/nvdp/encoder"
	"github.com/nvdp-project/nvdp/nvib"
)

// ModelTwin is an [nvib.Model]'s twin on a GPU, with an engine of its own: the model that training
// and evaluation, in package train, and the release's posteriors, in package release, compute on.
// Its methods hand the work to the device goroutine through [cuda.Device.Do]; the fields are for
// work done there.
type ModelTwin struct {
	Dev    *cuda.Device
	E      *Engine
	M      *NVDPModel
	Params []*Param // M.Params()
}

// OpenModelTwin compiles the kernels, which are cached, and uploads m's parameters. It returns the
// engine's errors and [Engine.NewNVDPModel]'s, wrapped as "device: ...".
func OpenModelTwin(d *cuda.Device, m *nvib.Model) (*ModelTwin, error) {
	t := &ModelTwin{Dev: d}
	err := d.Do(func() error {
		e, err := NewEngine(d)
		if err != nil {
			return err
		}
		if t.M, err = e.NewNVDPModel(m); err != nil {
			e.Close()
			return err
		}
		t.E, t.Params = e, t.M.Params()
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("device: %w", err)
	}
	return t, nil
}

// Close frees the twin's parameters and the engine's arena. It returns the device's errors.
func (t *ModelTwin) Close() error {
	return t.Dev.Do(func() error {
		t.E.FreeParams(t.Params)
		t.E.Close()
		return nil
	})
}

// Posterior returns the host copy of a batch's clipped posterior, computed on the device: the twin
// of [nvib.Model.Posterior]. It returns [NVDPModel.Posterior]'s errors and the device's.
func (t *ModelTwin) Posterior(in encoder.Input) (*nvib.Posterior, error) {
	var p *nvib.Posterior
	err := t.Dev.Do(func() error {
		t.E.Reset()
		var err error
		p, err = t.M.Posterior(t.E, in)
		return err
	})
	return p, err
}
