package dnn_test

import (
	"testing"

	"github.com/nvdp-project/nvdp/cuda"
	"github.com/nvdp-project/nvdp/dnn"
)

// withEngine runs fn with a fresh Engine on the open device d, inside Do:
// the subtests of one device share its compiled kernels (one compilation
// of the module for them all). fn reports with t.Error, never t.Fatal (it
// runs on the device goroutine).
func withEngine(t *testing.T, d *cuda.Device, fn func(t *testing.T, e *dnn.Engine)) {
	t.Helper()
	err := d.Do(func() error {
		e, err := dnn.NewEngine(d)
		if err != nil {
			return err
		}
		defer e.Close()
		fn(t, e)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
