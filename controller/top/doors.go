package top

import (
	"bufio"
	"context"
	"errors"
	"io"
	"strings"
	"sync"
	"time"

	"github.com/gearshift/gearshift/controller/api"
	"github.com/gearshift/gearshift/profiles"
)

// Doors counts the requests of the last minute by how their visitor was
// known (the profiles' front door records, profiles.Doors), and, with the
// config's sites, the backend requests of the last minute by site (the
// profiles' profiles.FetchLog records), in bounded memory. Safe for
// concurrent use.
type Doors struct {
	mu      sync.Mutex
	buckets [refusalWindow]doorBucket
	read    time.Time         // when a record was last read, or the reader started; zero: never
	totals  map[string]uint64 // backend requests by site since the start
}

type doorBucket struct {
	sec     int64
	counts  [len(profiles.Doors)]int
	fetches map[string]int // by site
}

// maxFetchSites bounds the sites a second's bucket counts: the config's
// sites are at most 1000 (a VCL of the operator's own could log more
// names).
const maxFetchSites = 1024

// Add counts one request of door at now; a word that is no door is not
// counted.
func (d *Doors) Add(now time.Time, door string) {
	i := doorIndex(door)
	if i < 0 {
		return
	}
	sec := now.Unix()
	d.mu.Lock()
	defer d.mu.Unlock()
	b := &d.buckets[sec%refusalWindow]
	if b.sec != sec {
		*b = doorBucket{sec: sec}
	}
	b.counts[i]++
}

// AddFetch counts one backend request of site at now.
func (d *Doors) AddFetch(now time.Time, site string) {
	sec := now.Unix()
	d.mu.Lock()
	defer d.mu.Unlock()
	b := &d.buckets[sec%refusalWindow]
	if b.sec != sec {
		*b = doorBucket{sec: sec}
	}
	if b.fetches == nil {
		b.fetches = map[string]int{}
	}
	if _, ok := b.fetches[site]; ok || len(b.fetches) < maxFetchSites {
		b.fetches[site]++
	}
	if d.totals == nil {
		d.totals = map[string]uint64{}
	}
	if _, ok := d.totals[site]; ok || len(d.totals) < maxFetchSites {
		d.totals[site]++
	}
}

// FetchTotal is the backend requests of site read since the start.
func (d *Doors) FetchTotal(site string) uint64 {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.totals[site]
}

// Fetches sums the backend requests of the minute before now by site; ok
// is false while the log is not read.
func (d *Doors) Fetches(now time.Time) (bySite map[string]int, ok bool) {
	sec := now.Unix()
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.read.IsZero() {
		return nil, false
	}
	bySite = map[string]int{}
	d.lastMinute(sec, func(b *doorBucket) {
		for site, n := range b.fetches {
			bySite[site] += n
		}
	})
	return bySite, true
}

// FetchesIn sums the backend requests of every site in the whole seconds
// from from up to to (at most the last minute's, which the buckets
// keep); ok is false while the log is not read.
func (d *Doors) FetchesIn(from, to time.Time) (n int, ok bool) {
	lo, hi := from.Unix(), to.Unix()
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.read.IsZero() {
		return 0, false
	}
	d.lastMinute(hi, func(b *doorBucket) {
		if b.sec >= lo && b.sec < hi {
			for _, c := range b.fetches {
				n += c
			}
		}
	})
	return n, true
}

// lastMinute calls fn with each bucket of the minute before sec; d.mu is
// held.
func (d *Doors) lastMinute(sec int64, fn func(*doorBucket)) {
	for i := range d.buckets {
		if b := &d.buckets[i]; b.sec > sec-refusalWindow && b.sec <= sec {
			fn(b)
		}
	}
}

// Reading marks the log as read at now (the reader runs), so that Stats
// has counts to give even before a request comes.
func (d *Doors) Reading(now time.Time) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.read.IsZero() {
		d.read = now
	}
}

// Stopped marks the log as not read: Stats gives nothing until Reading.
func (d *Doors) Stopped() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.read = time.Time{}
}

// Stats sums the minute before now, by door in the order of
// profiles.Doors; ok is false while the log is not read.
func (d *Doors) Stats(now time.Time) (counts [len(profiles.Doors)]int, ok bool) {
	sec := now.Unix()
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.read.IsZero() {
		return counts, false
	}
	d.lastMinute(sec, func(b *doorBucket) {
		for i, n := range b.counts {
			counts[i] += n
		}
	})
	return counts, true
}

// FrontDoor is Stats as status front_door: nil while the log is not
// read.
func (d *Doors) FrontDoor(now time.Time) *api.FrontDoor {
	n, ok := d.Stats(now)
	if !ok {
		return nil
	}
	// A door added to profiles.Doors must be given a field here: the
	// array's length no longer matches, and this fails to compile.
	var by [4]int = n
	return &api.FrontDoor{Direct: by[0], ProxyProtocol: by[1], Forwarded: by[2], Unidentified: by[3]}
}

func doorIndex(door string) int {
	for i, w := range profiles.Doors {
		if w == door {
			return i
		}
	}
	return -1
}

// DoorArgs are varnishlog's arguments for WatchDoors: the raw front door
// and site fetch records only. Without a name, the default instance's log (a stock
// Varnish's).
func (l Log) DoorArgs() []string {
	args := []string{"-t", "0", "-g", "raw", "-i", "VCL_Log", "-I", "VCL_Log:^(" + profiles.DoorLog + "|" + profiles.FetchLog + ")"}
	if l.Name != "" {
		args = append([]string{"-n", l.Name}, args...)
	}
	return args
}

// WatchDoors runs varnishlog until ctx ends and counts every front door
// record it reports into d, at the time it is read. Its errors are
// Watch's.
func (l Log) WatchDoors(ctx context.Context, d *Doors, now func() time.Time) error {
	// The log counts as read once varnishlog has run a moment (one that
	// cannot attach exits at once), or gave a record.
	running, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		select {
		case <-running.Done():
		case <-time.After(doorsSettle):
			d.Reading(now())
		}
	}()
	err := l.run(ctx, l.DoorArgs(), func(rd io.Reader) error {
		return parseDoors(rd, func(door, site string) {
			d.Reading(now())
			if site != "" {
				d.AddFetch(now(), site)
				return
			}
			d.Add(now(), door)
		})
	})
	cancel()
	<-done
	d.Stopped()
	return err
}

// doorsSettle is how long varnishlog runs before its silence means no
// request rather than no log.
const doorsSettle = 2 * time.Second

// parseDoors reads varnishlog's raw records ("  32770 VCL_Log  c
// gearshift-door: proxy_protocol", "  32771 VCL_Log  b gearshift-fetch:
// shop") and calls emit with each door word, or each fetch's site.
func parseDoors(rd io.Reader, emit func(door, site string)) error {
	br := bufio.NewReaderSize(rd, maxLine)
	for {
		line, err := readLine(br)
		if _, rest, ok := strings.Cut(string(line), profiles.DoorLog); ok {
			emit(strings.TrimSpace(rest), "")
		} else if _, rest, ok := strings.Cut(string(line), profiles.FetchLog); ok {
			if site := strings.TrimSpace(rest); site != "" {
				emit("", site)
			}
		}
		if err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		}
	}
}
