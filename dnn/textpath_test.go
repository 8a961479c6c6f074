package dnn_test

import (
	"testing"

	"github.com/nvdp-project/nvdp/dnn"
	"github.com/nvdp-project/nvdp/internal/cudaemu"
)

// TestTextPathTwins runs the tests of the Transformer path's twins (Philox
// and dropout, GELU and tanh, attention, the Transformer layer, the
// embeddings and the encoder) on one device: one compilation of the module
// for them all. Each reports with t.Error (it runs on the device
// goroutine).
func TestTextPathTwins(t *testing.T) {
	d := cudaemu.OpenDevice(t)
	for _, tc := range []struct {
		name string
		fn   func(t *testing.T, e *dnn.Engine)
	}{
		{"Philox", testPhiloxDevice},
		{"Dropout", testDropoutTwin},
		{"GELU", testGELUTwin},
		{"Attention", testAttentionTwin},
		{"TransformerLayer", testTransformerLayerTwin},
		{"Embedding", testEmbeddingTwin},
		{"Encoder", testEncoderTwin},
	} {
		t.Run(tc.name, func(t *testing.T) { withEngine(t, d, tc.fn) })
	}
}
