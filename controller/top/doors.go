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
// profiles' profiles.FetchLog records), in bounded memory; and the
// fetches the backend turned away at its connection limit (Varnish's
// "busy" FetchError, the sites' backend_full refusals), which it tells
// on Rush as they are read. Safe for concurrent use.
type Doors struct {
	mu      sync.Mutex
	buckets [refusalWindow]doorBucket
	read    time.Time         // when a record was last read, or the reader started; zero: never
	totals  map[string]uint64 // backend requests by site since the start
	rush    chan struct{}     // Rush's; made on first use
}

type doorBucket struct {
	sec     int64
	counts  [len(profiles.Doors)]int
	fetches map[string]int // by site
	refused int            // fetches turned away at the backend's limit
	// refusedBy counts the refusals that name their site (the sites'
	// limits' backend_full), by site.
	refusedBy map[string]int
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
	b := d.bucket(sec)
	b.counts[i]++
}

// bucket returns the bucket of the second sec, emptied if it held an
// older second's; d.mu is held.
func (d *Doors) bucket(sec int64) *doorBucket {
	b := &d.buckets[sec%refusalWindow]
	if b.sec != sec {
		*b = doorBucket{sec: sec}
	}
	return b
}

// AddFetch counts one backend request of site at now.
func (d *Doors) AddFetch(now time.Time, site string) {
	sec := now.Unix()
	d.mu.Lock()
	defer d.mu.Unlock()
	b := d.bucket(sec)
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

// AddRefused counts one fetch the backend turned away at its connection
// limit at now, of site ("": not known), and tells Rush.
func (d *Doors) AddRefused(now time.Time, site string) {
	sec := now.Unix()
	d.mu.Lock()
	defer d.mu.Unlock()
	b := d.bucket(sec)
	b.refused++
	if site != "" {
		if b.refusedBy == nil {
			b.refusedBy = map[string]int{}
		}
		if _, ok := b.refusedBy[site]; ok || len(b.refusedBy) < maxFetchSites {
			b.refusedBy[site]++
		}
	}
	select {
	case d.rushChan() <- struct{}{}:
	default: // one already waits: the reader sees every count at once
	}
}

// Rush receives when a refusal was counted since the last receive: the
// loop need not wait for its next poll to see the backend full.
func (d *Doors) Rush() <-chan struct{} {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.rushChan()
}

// rushChan returns d.rush, made on first use; d.mu is held.
func (d *Doors) rushChan() chan struct{} {
	if d.rush == nil {
		d.rush = make(chan struct{}, 1)
	}
	return d.rush
}

// Refused returns the fetches turned away in the window up to now, per
// second of it (backend_busy as the log tells it): the window's whole
// seconds, the current one so far. ok is false while the log is not
// read.
func (d *Doors) Refused(now time.Time, window time.Duration) (perSecond float64, ok bool) {
	secs := int64(max(window.Round(time.Second), time.Second) / time.Second)
	sec := now.Unix()
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.read.IsZero() {
		return 0, false
	}
	n := 0
	d.lastMinute(sec, func(b *doorBucket) {
		if b.sec > sec-secs {
			n += b.refused
		}
	})
	return float64(n) / float64(secs), true
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
	return d.minuteBySite(now, func(b *doorBucket) map[string]int { return b.fetches })
}

// RefusedBySite sums the refusals of the minute before now that named
// their site, by site; ok is false while the log is not read.
func (d *Doors) RefusedBySite(now time.Time) (bySite map[string]int, ok bool) {
	return d.minuteBySite(now, func(b *doorBucket) map[string]int { return b.refusedBy })
}

// minuteBySite sums the by-site counts count picks of each bucket of the
// minute before now; ok is false while the log is not read.
func (d *Doors) minuteBySite(now time.Time, count func(*doorBucket) map[string]int) (bySite map[string]int, ok bool) {
	sec := now.Unix()
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.read.IsZero() {
		return nil, false
	}
	bySite = map[string]int{}
	d.lastMinute(sec, func(b *doorBucket) {
		for site, n := range count(b) {
			bySite[site] += n
		}
	})
	return bySite, true
}

// DemandIn sums the backend requests of every site and the fetches the
// backend turned away at its limit in the whole seconds from from up to
// to (at most the last minute's, which the buckets keep): what was asked
// of the backend, which a full backend's own count of requests hides. ok
// is false while the log is not read.
func (d *Doors) DemandIn(from, to time.Time) (n int, ok bool) {
	ok = d.between(from, to, func(b *doorBucket) {
		n += b.refused
		for _, c := range b.fetches {
			n += c
		}
	})
	return n, ok
}

// SiteDemandIn is DemandIn by site: each site's backend requests and the
// refusals that named it.
func (d *Doors) SiteDemandIn(from, to time.Time) (bySite map[string]int, ok bool) {
	bySite = map[string]int{}
	ok = d.between(from, to, func(b *doorBucket) {
		for site, n := range b.fetches {
			bySite[site] += n
		}
		for site, n := range b.refusedBy {
			bySite[site] += n
		}
	})
	return bySite, ok
}

// between calls fn with each bucket of the whole seconds from from up to
// to, under d.mu; false, calling nothing, while the log is not read.
func (d *Doors) between(from, to time.Time, fn func(*doorBucket)) bool {
	lo, hi := from.Unix(), to.Unix()
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.read.IsZero() {
		return false
	}
	d.lastMinute(hi, func(b *doorBucket) {
		if b.sec >= lo && b.sec < hi {
			fn(b)
		}
	})
	return true
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

// DoorArgs are varnishlog's arguments for WatchDoors: the raw front door,
// site fetch and backend_full records, and Varnish's FetchError of a
// backend at its connection limit. Without a name, the default
// instance's log (a stock Varnish's).
func (l Log) DoorArgs() []string {
	args := []string{"-t", "0", "-g", "raw", "-i", "VCL_Log,FetchError",
		"-I", "VCL_Log:^(" + profiles.DoorLog + "|" + profiles.FetchLog + "|" + fullRecord + ")",
		"-I", "FetchError:" + busyError + "$"}
	if l.Name != "" {
		args = append([]string{"-n", l.Name}, args...)
	}
	return args
}

// fullRecord starts the VCL_Log record of a request the sites' limits
// turned away (reason backend_full), busyError ends Varnish's FetchError
// of a fetch over a backend's .max_connections ("backend NAME: busy").
var (
	fullRecord = profiles.ReasonLog + BackendFull
	busyError  = ": busy"
)

// WatchDoors runs varnishlog until ctx ends and counts every record it
// reports into d, at the time it is read. Its errors are Watch's.
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
		return parseDoors(rd, func(r doorRecord) {
			at := now()
			d.Reading(at)
			switch {
			case r.refused:
				d.AddRefused(at, r.site)
			case r.site != "":
				d.AddFetch(at, r.site)
			default:
				d.Add(at, r.door)
			}
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

// doorRecord is one record WatchDoors reads: a request's door word, a
// backend request's site, or a fetch turned away at the backend's limit
// (refused, with its site when the record names it).
type doorRecord struct {
	door, site string
	refused    bool
}

// parseDoors reads varnishlog's raw records ("  32770 VCL_Log  c
// gearshift-door: proxy_protocol", "  32771 VCL_Log  b gearshift-fetch:
// shop", "  32772 FetchError  b backend default: busy", "  32773 VCL_Log
// c gearshift-reason: backend_full site=shop") and calls emit with each.
// A busy FetchError of the daemon's guest backend or of the probe's is
// no refusal of the site's backend.
func parseDoors(rd io.Reader, emit func(doorRecord)) error {
	br := bufio.NewReaderSize(rd, maxLine)
	for {
		line, err := readLine(br)
		text := string(line)
		if _, rest, ok := strings.Cut(text, profiles.DoorLog); ok {
			emit(doorRecord{door: strings.TrimSpace(rest)})
		} else if _, rest, ok := strings.Cut(text, profiles.FetchLog); ok {
			if site := strings.TrimSpace(rest); site != "" {
				emit(doorRecord{site: site})
			}
		} else if busyFetch(text) {
			emit(doorRecord{refused: true})
		} else if _, rest, ok := strings.Cut(text, fullRecord); ok {
			r := doorRecord{refused: true}
			for _, f := range strings.Fields(rest) {
				if site, ok := strings.CutPrefix(f, "site="); ok {
					r.site = site
				}
			}
			emit(r)
		}
		if err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		}
	}
}

// busyFetch tells whether a raw record is Varnish's FetchError of a fetch
// to the site's backend over its connection limit.
func busyFetch(record string) bool {
	_, rest, ok := strings.Cut(record, " FetchError ")
	if !ok || !strings.HasSuffix(strings.TrimSpace(rest), busyError) {
		return false
	}
	return profiles.TurnsFetchesAway(rest)
}
