package mlm

import (
	"fmt"
	"strconv"
)

// legacyState returns loop.Config.Legacy for pretraining checkpoints written
// before the shared training loop: their metadata holds step, epoch, pos
// (sequences of the epoch done), elapsed_s and the two random states, each
// its own key; batchSize and perEpoch (batches per epoch) place pos.
func legacyState(batchSize, perEpoch int) func(meta map[string]string) (map[string]any, error) {
	return func(meta map[string]string) (map[string]any, error) {
		v := map[string]int{}
		for _, k := range []string{"step", "epoch", "pos"} {
			n, err := strconv.Atoi(meta[k])
			if err != nil {
				return nil, fmt.Errorf("metadata %q: %w", k, err)
			}
			v[k] = n
		}
		secs, err := strconv.ParseFloat(meta["elapsed_s"], 64)
		if err != nil {
			return nil, fmt.Errorf("metadata \"elapsed_s\": %w", err)
		}
		if v["pos"]%batchSize != 0 {
			return nil, fmt.Errorf("metadata pos %d is not a multiple of the batch size %d", v["pos"], batchSize)
		}
		epoch, batch := v["epoch"], v["pos"]/batchSize
		if batch >= perEpoch { // that loop moved to the next epoch at the next step
			epoch, batch = epoch+1, 0
		}
		return map[string]any{"step": v["step"], "epoch": epoch, "batch": batch, "secs": secs,
			maskKey: meta[maskKey], dropoutKey: meta[dropoutKey]}, nil
	}
}
