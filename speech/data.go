package speech

import (
	"context"
	"fmt"
	"runtime"
	"sync"

	"github.com/nvdp-project/nvdp/audio"
	"github.com/nvdp-project/nvdp/lid"
)

// Dataset is a split of a corpus in memory: every utterance's waveform and
// its language. A waveform is at [audio.SampleRate], cropped to its first T
// samples or zero-padded to T, and normalised to zero mean and unit variance
// over its real samples with [audio.Normalize], as the Wav2Vec2 feature
// extractor does.
type Dataset struct {
	Split      string
	Utterances []lid.Utterance
	T          int       // samples per utterance
	Waves      []float32 // [M, T]
	Labels     []int     // [M], indices into lid.Languages()
	Cropped    int       // utterances longer than T (their end is dropped)
}

// Len is the number of utterances M.
func (d *Dataset) Len() int { return len(d.Labels) }

// LoadSplit reads the first limit utterances of a split of the corpus at
// root, or all of them when limit is 0, with [lid.Load], and their audio. The
// audio is read by [audio.LoadCropped] as WAV, mono, resampled to 16 kHz,
// then cropped or zero-padded to T samples and normalised.
//
// An utterance longer than T is cropped before it is resampled: only the
// input that its first T samples depend on is decoded and resampled, giving
// the same samples bit for bit. So loading costs time in proportion to T, not
// to the files' lengths.
//
// Loading stops once ctx is done, between files and inside a file's
// resampling; the error then wraps ctx's, so errors.Is(err,
// context.Canceled) holds. Other errors name the file: a malformed CSV,
// unreadable or empty audio, a sample rate outside [audio.MinSampleRate] to
// [audio.MaxSampleRate], or a split with no utterance.
func LoadSplit(ctx context.Context, root, split string, limit, T int) (*Dataset, error) {
	if T < 1 {
		return nil, fmt.Errorf("speech: %d samples per utterance, want >= 1", T)
	}
	utts, err := lid.Load(root, split)
	if err != nil {
		return nil, err
	}
	if limit > 0 && limit < len(utts) {
		utts = spread(utts, limit)
	}
	if len(utts) == 0 {
		return nil, fmt.Errorf("speech: corpus %s: the %s split has no utterance", root, split)
	}
	d := &Dataset{Split: split, Utterances: utts, T: T, Waves: make([]float32, len(utts)*T), Labels: make([]int, len(utts))}
	errs := make([]error, len(utts))
	cropped := make([]bool, len(utts))
	var wg sync.WaitGroup
	next := make(chan int)
	for range runtime.GOMAXPROCS(0) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				cropped[i], errs[i] = d.load(ctx, i)
			}
		}()
	}
feed:
	for i := range utts {
		select {
		case next <- i:
		case <-ctx.Done():
			break feed
		}
	}
	close(next)
	wg.Wait()
	if err := ctx.Err(); err != nil { // some utterances were not loaded
		return nil, fmt.Errorf("speech: loading the %s split of %s: %w", split, root, err)
	}
	for i, err := range errs {
		if err != nil {
			return nil, err
		}
		if cropped[i] {
			d.Cropped++
		}
		d.Labels[i] = utts[i].Language
	}
	return d, nil
}

// load reads utterance i into row i of d.Waves.
func (d *Dataset) load(ctx context.Context, i int) (cropped bool, err error) {
	u := d.Utterances[i]
	w, full, err := audio.LoadCropped(ctx, u.Path, d.T)
	if err != nil {
		return false, err
	}
	if len(w) == 0 {
		return false, fmt.Errorf("speech: audio %s is empty", u.Path)
	}
	row := d.Waves[i*d.T : i*d.T+len(w)]
	copy(row, w)
	if err := audio.Normalize(row); err != nil {
		return false, fmt.Errorf("speech: audio %s: %w", u.Path, err)
	}
	return full > d.T, nil
}

// spread keeps limit utterances of utts, every language in turn (lid.Load
// returns them grouped by language), so that a limited split still has
// every language: the utterances of round r are each language's r-th.
func spread(utts []lid.Utterance, limit int) []lid.Utterance {
	byLang := map[int][]lid.Utterance{}
	var order []int
	for _, u := range utts {
		if _, ok := byLang[u.Language]; !ok {
			order = append(order, u.Language)
		}
		byLang[u.Language] = append(byLang[u.Language], u)
	}
	out := make([]lid.Utterance, 0, limit)
	for r := 0; len(out) < limit; r++ {
		for _, l := range order {
			if r < len(byLang[l]) && len(out) < limit {
				out = append(out, byLang[l][r])
			}
		}
	}
	return out
}

// Batch returns the waveforms idx as a wav2vec2 input of shape [len(idx), T],
// and their labels. The input has no mask: every sample counts, since the
// zero padding of a short utterance is silence the encoder reads, so that
// every input has F frames.
func (d *Dataset) Batch(idx []int) (audio.Batch, []int) {
	in := audio.Batch{B: len(idx), T: d.T, Values: make([]float32, len(idx)*d.T)}
	labels := make([]int, len(idx))
	for b, i := range idx {
		copy(in.Values[b*d.T:(b+1)*d.T], d.Waves[i*d.T:(i+1)*d.T])
		labels[b] = d.Labels[i]
	}
	return in, labels
}
