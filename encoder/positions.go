package encoder

// PositionIDs returns the position ids [B*S] that Forward gives the
// position embeddings for in: 0..S-1 per row for BERT; RoBERTa's padding_idx
// offsets (see positionIDs). For the device twin (dnn.Encoder), which must
// look up the same rows.
func (e *Encoder) PositionIDs(in Input) []int32 { return e.positionIDs(in) }
