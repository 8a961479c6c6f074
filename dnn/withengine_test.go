package dnn_test

import (
	"testing"

	"github.com/nvdp-project/nvdp/cuda"
	"github.com/nvdp-project/nvdp/dnn"
	"github.com/nvdp-project/nvdp/internal/cudaemu"
)

// TestTrainingTwins runs the tests of the pooling, loss and optimizer
// twins and of the loop's device optimizer on one device (one compilation
// of the module for them all: the stand-in's compilation of every kernel
// is the slow part of a small test).
func TestTrainingTwins(t *testing.T) {
	d := cudaemu.OpenDevice(t)
	for _, tc := range []struct {
		name string
		fn   func(t *testing.T, e *dnn.Engine)
	}{
		{"MaskedMeanPool", testMaskedMeanPool},
		{"FirstToken", testFirstToken},
		{"SoftmaxCrossEntropy", testSoftmaxCrossEntropyTwin},
		{"SoftmaxCrossEntropyNaN", testSoftmaxCrossEntropyNaN},
		{"MSE", testMSETwin},
		{"GradNorm", testGradNormTwin},
		{"AdamW", testAdamWTwin},
		{"AdamWMomentsLifecycle", testAdamWMomentsLifecycle},
	} {
		t.Run(tc.name, func(t *testing.T) { withEngine(t, d, tc.fn) })
	}
	t.Run("SoftmaxCrossEntropyBadLabel", func(t *testing.T) { testSoftmaxCrossEntropyBadLabel(t, d) })
	t.Run("DeviceOptimizerLoop", func(t *testing.T) { testDeviceOptimizerLoop(t, d) })
}

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
