package serve

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
)

// batcher releases the texts of requests that arrive together in one forward pass (dynamic
// batching, as Triton's dynamic batcher and text-embeddings-inference do): a worker takes the
// first request waiting, then every request already queued, and waits up to window for more
// while other admitted requests are still on their way to it (reading their bodies, checking
// their budgets), up to maxTexts texts in all. It calls the
// Releaser once for the batch and gives each request its own embeddings; the charge and the
// response stay the request's own (Server.embed), so a request refused by its budget releases
// nothing, and a request whose context ends gets no releases.
//
// One request's failure does not fail another's: when the batch's Release fails and it held
// several requests, each is released again on its own. The Releaser pads every text to the
// release length, so a batch's forward pass takes the same time whatever its texts' lengths: a
// request's latency depends on how many texts share its batch, never on their lengths
// (docs/serving.md, "What time reveals").
type batcher struct {
	rel      Releaser
	window   time.Duration
	maxTexts int
	// lim is the server's limiter: a running batch holds one of its slots
	// (its workers are as many as the slots).
	lim *limiter
	// coming counts the requests admitted that have not reached the queue
	// yet nor ended without a release (expect): a batch waits for them.
	coming atomic.Int64
	reqs   chan *batchReq
	quit   chan struct{} // closed by Close
	wg     sync.WaitGroup
	// observe records each batch's requests, texts and release time.
	observe func(requests, texts int, seconds float64)
}

// batchReq is one request's texts and, once its batch ran, its result.
type batchReq struct {
	ctx   context.Context
	texts []string
	embs  []Embedding
	err   error
	done  chan struct{}
}

// newBatcher starts one batch worker per slot of lim over rel, with a queue of queue requests;
// Close stops them.
func newBatcher(rel Releaser, lim *limiter, o Batching, queue int, observe func(requests, texts int, seconds float64)) *batcher {
	b := &batcher{rel: rel, window: o.BatchWindow, maxTexts: o.BatchTexts, lim: lim, reqs: make(chan *batchReq, queue),
		quit: make(chan struct{}), observe: observe}
	for range cap(lim.slots) {
		b.wg.Add(1)
		go b.work()
	}
	return b
}

// expect counts an admitted request that may come to Release; the function it returns (safe to
// call twice) stops counting it: Release calls it once the request is queued, and the request's
// handler when it ends, released or not.
func (b *batcher) expect() (arrived func()) {
	b.coming.Add(1)
	var once sync.Once
	return func() { once.Do(func() { b.coming.Add(-1) }) }
}

// Release releases texts in the next batch and returns their embeddings, in order; it returns
// ctx's error when ctx ends first (the batch's releases of texts are then dropped, never sent).
// arrived is the request's expect function, called once the request is queued.
func (b *batcher) Release(ctx context.Context, texts []string, arrived func()) ([]Embedding, error) {
	r := &batchReq{ctx: ctx, texts: texts, done: make(chan struct{})}
	select {
	case b.reqs <- r:
		arrived()
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-b.quit:
		return nil, errBatcherClosed
	}
	select {
	case <-r.done:
		return r.embs, r.err
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-b.quit:
		return nil, errBatcherClosed
	}
}

// errBatcherClosed answers a request that reaches a closed batcher (a server past its shutdown).
var errBatcherClosed = errors.New("serve: the server is shut down")

// Close stops the workers once their batches are done and waits for them; a request still
// queued, or one that comes later, gets an error.
func (b *batcher) Close() {
	close(b.quit)
	b.wg.Wait()
}

// work runs batches until Close.
func (b *batcher) work() {
	defer b.wg.Done()
	var next *batchReq // a request that did not fit the previous batch
	for {
		first := next
		if first == nil {
			select {
			case first = <-b.reqs:
			case <-b.quit:
				return
			}
		}
		var batch []*batchReq
		batch, next = b.gather(first)
		b.run(batch)
	}
}

// gather takes first and the requests that join it: those queued already, then those that come
// within the window while admitted requests are still on their way (expect). It returns the batch and a
// request taken that did not fit (nil if none).
func (b *batcher) gather(first *batchReq) (batch []*batchReq, carry *batchReq) {
	batch = []*batchReq{first}
	n := len(first.texts)
	var timer *time.Timer
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	for n < b.maxTexts {
		var r *batchReq
		select {
		case r = <-b.reqs:
		default:
			if b.window <= 0 || b.coming.Load() <= 0 {
				return batch, nil
			}
			if timer == nil {
				timer = time.NewTimer(b.window)
			}
			select {
			case r = <-b.reqs:
			case <-timer.C:
				return batch, nil
			case <-b.quit:
				return batch, nil
			}
		}
		if n+len(r.texts) > b.maxTexts {
			return batch, r
		}
		batch = append(batch, r)
		n += len(r.texts)
	}
	return batch, nil
}

// run releases the texts of the batch's live requests in one call and answers each.
func (b *batcher) run(batch []*batchReq) {
	live := batch[:0:0]
	var texts []string
	for _, r := range batch {
		if r.ctx.Err() != nil {
			r.err = r.ctx.Err()
			close(r.done)
			continue
		}
		live = append(live, r)
		texts = append(texts, r.texts...)
	}
	if len(live) == 0 {
		return
	}
	ctx, cancel := allDone(live)
	defer cancel()
	b.lim.slots <- struct{}{}        // never waits: one slot per worker
	defer func() { <-b.lim.slots }() // held through a failed batch's releases one by one too
	t0 := time.Now()
	embs, err := b.rel.Release(ctx, texts)
	if b.observe != nil {
		b.observe(len(live), len(texts), time.Since(t0).Seconds())
	}
	if err == nil && len(embs) != len(texts) {
		err = fmt.Errorf("model released %d embeddings for %d texts", len(embs), len(texts))
	}
	if err != nil && len(live) > 1 {
		for _, r := range live { // each on its own: one request's failure is its own
			r.embs, r.err = b.rel.Release(r.ctx, r.texts)
			close(r.done)
		}
		return
	}
	off := 0
	for _, r := range live {
		if err != nil {
			r.err = err
		} else {
			r.embs = embs[off : off+len(r.texts) : off+len(r.texts)]
		}
		off += len(r.texts)
		close(r.done)
	}
}

// allDone returns a context that ends when every request's context has ended, so that a batch
// stops only when nobody waits for it.
func allDone(reqs []*batchReq) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(context.Background())
	var mu sync.Mutex
	left := len(reqs)
	stops := make([]func() bool, len(reqs))
	for i, r := range reqs {
		stops[i] = context.AfterFunc(r.ctx, func() {
			mu.Lock()
			defer mu.Unlock()
			if left--; left == 0 {
				cancel()
			}
		})
	}
	return ctx, func() {
		for _, stop := range stops {
			stop()
		}
		cancel()
	}
}
