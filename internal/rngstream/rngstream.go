// Package rngstream names every random stream of nvdp's training and
// pretraining runs, in one place. Each purpose (initialisation, data order,
// dropout and NVDP sampling, masking, evaluation sampling) draws from its own
// PCG stream of the run's seed, so a run is reproducible from its seed, one
// purpose's draws never shift another's, and a resumed run continues the
// streams whose state its checkpoint holds (internal/loop).
//
// The numbers are those the runs have always used (results for a seed do not
// change): `nvdp train` (package train) uses PCG(seed, trainTag | n) with the
// purposes numbered 1, 2, 1000 + epoch, 4999 and 5000 + epoch; `nvdp pretrain`
// (package mlm) uses PCG(seed, n) with n = 0..5 and 0x4e1d, and PCG(seed ^
// 0x9e3779b97f4a7c15, epoch) for the data order. Because trainTag's low bits
// are or-ed, not added, TrainDev's instance e+96 is TrainOrder's instance e:
// the streams of one run are distinct for runs of up to 96 epochs
// (TestDistinct).
package rngstream

import "math/rand/v2"

// Stream is one named random stream: instance i (an epoch for per-epoch
// streams, 0 otherwise) is PCG(seed ^ Salt, Tag | (Base + i)).
type Stream struct {
	Name            string
	Salt, Tag, Base uint64
}

// PCG returns the source of instance i (>= 0) of s for a run's seed. Keep it
// to save and restore the stream's state (nn.RNGState, nn.RestoreRNG).
func (s Stream) PCG(seed uint64, i int) *rand.PCG {
	if i < 0 {
		panic("rngstream: negative instance of " + s.Name)
	}
	return rand.NewPCG(seed^s.Salt, s.Tag|(s.Base+uint64(i)))
}

// Rand returns a generator over instance i of s for a run's seed.
func (s Stream) Rand(seed uint64, i int) *rand.Rand { return rand.New(s.PCG(seed, i)) }

// trainTag ("nvdp" in ASCII, shifted) marks the sequence numbers of package
// train's streams.
const trainTag = 0x6e766470 << 8

// The streams of a fine-tuning run (package train).
var (
	// TrainInit initialises the encoder (scratch) and the NVIB / NVDP block
	// and head; a model directory is rebuilt with it before its weights load.
	TrainInit = Stream{Name: "train init", Tag: trainTag, Base: 1}
	// TrainSample draws dropout and the NVDP sampling of training steps; its
	// state is in every checkpoint.
	TrainSample = Stream{Name: "train sampling", Tag: trainTag, Base: 2}
	// TrainOrder's instance e is the data order of epoch e (0-based).
	TrainOrder = Stream{Name: "train data order", Tag: trainTag, Base: 1000}
	// TrainEval draws the NVDP sampling of a stand-alone evaluation
	// (train.Evaluate: predictions and posterior export).
	TrainEval = Stream{Name: "evaluation sampling", Tag: trainTag, Base: 4999}
	// TrainDev's instance e draws the NVDP sampling of the dev evaluation at
	// the end of epoch e (0-based).
	TrainDev = Stream{Name: "dev evaluation sampling", Tag: trainTag, Base: 5000}
)

// TrainSampleDevice keys the counter-based generator (Philox4x32-10,
// dnn.Philox) from which a training run on the GPU draws its dropout on the
// device (TrainSample's dropout draws on the CPU): the key is the stream's
// first draw (Key); the counter is the position in the stream, which the
// device layers advance and a checkpoint keeps.
var TrainSampleDevice = Stream{Name: "train sampling (device)", Tag: trainTag, Base: 3}

// Key returns a 64-bit key for a counter-based generator: the first draw
// of instance i of s for a run's seed.
func (s Stream) Key(seed uint64, i int) uint64 { return s.PCG(seed, i).Uint64() }

// The streams of a pretraining run (package mlm).
var (
	// PretrainInit initialises the encoder and the MLM head.
	PretrainInit = Stream{Name: "pretrain init", Base: 0}
	// PretrainPack and PretrainHeldOutPack pack the training and held-out
	// documents into sequences (mlm's buildSequences).
	PretrainPack        = Stream{Name: "pretrain packing", Base: 1}
	PretrainHeldOutPack = Stream{Name: "held-out packing", Base: 2}
	// PretrainEvalMask masks the held-out sequences once (fixed masks for
	// every evaluation).
	PretrainEvalMask = Stream{Name: "held-out masking", Base: 3}
	// PretrainMask masks the training batches and PretrainDropout draws their
	// dropout; both states are in every checkpoint.
	PretrainMask    = Stream{Name: "pretrain masking", Base: 4}
	PretrainDropout = Stream{Name: "pretrain dropout", Base: 5}
	// PretrainHeldOut chooses the held-out documents (mlm's splitHeldOut).
	PretrainHeldOut = Stream{Name: "held-out split", Base: 0x4e1d}
	// PretrainOrder's instance e is the data order of epoch e (0-based).
	PretrainOrder = Stream{Name: "pretrain data order", Salt: 0x9e3779b97f4a7c15}
)
