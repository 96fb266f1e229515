package procs

import "sync"

// Whether the server runs on one processor (the governor's choice, or a
// runtime default of one under a CPU affinity or quota that changed after
// start), for what serves better knowing it: a UDP address served by one
// socket per CPU steers its datagrams to one socket while the server runs
// on one processor, so one reader wakes instead of several taking turns on
// it.
//
// Guarantee: a watcher is called with the choice of the moment when it
// starts watching and after every change, one call at a time, in the order
// of the changes; once its stop returns it is never called again.
var watch struct {
	mu       sync.Mutex // guards the fields below; held through every call
	one      bool       // one processor now
	watchers map[*func(one bool)]struct{}
}

// Watch calls f with the choice now (true: one processor) and
// again after each change, until the returned stop is called. f must not
// block, call Watch or a stop, or take a lock held around a call of Watch:
// it runs with the choice locked (lock order: the caller's, then this).
func Watch(f func(one bool)) (stop func()) {
	watch.mu.Lock()
	defer watch.mu.Unlock()
	if watch.watchers == nil {
		watch.watchers = make(map[*func(bool)]struct{})
	}
	key := &f
	watch.watchers[key] = struct{}{}
	f(watch.one)
	return func() {
		watch.mu.Lock()
		delete(watch.watchers, key)
		watch.mu.Unlock()
	}
}

// publish records the governor's new choice and tells every watcher.
func publish(one bool) {
	watch.mu.Lock()
	defer watch.mu.Unlock()
	if one == watch.one {
		return
	}
	watch.one = one
	for f := range watch.watchers {
		(*f)(one)
	}
}
