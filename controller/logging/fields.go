package logging

// The names of gearshift's log: the messages and the fields that readers
// of the log (`gearshift logs`, tests, operators' queries) look for, and
// the keys of the encoder (EncoderConfig). Every field the daemon writes
// goes through one of these names, and the reader reads the same ones:
// a name is changed here, or not at all.
const (
	MsgStateChange = "state change" // a gear change; see StateChange
	MsgReloading   = "reloading"    // SIGHUP received: a reload begins

	// A gear change (StateChange) and the poll.
	FieldFrom     = "from"
	FieldTo       = "to"
	FieldReason   = "reason"
	FieldForced   = "forced"
	FieldSwitchMS = "switch_ms"
	FieldError    = "error"    // zap.Error's key
	FieldRunnable = "runnable" // the sample's run queue (debug level, every poll)
	FieldLoad1    = "load1"
	FieldState    = "state"   // the current gear
	FieldOnExit   = "on_exit" // what stopping leaves active
	FieldFailures = "failures"
	FieldSource   = "source" // a signal source that failed to read
	FieldPath     = "path"   // a file or directory the daemon writes (the history)
	FieldIncident = "incident"
	FieldSummary  = "summary" // an incident's summary, on the step back to light
	FieldAdvice   = "advice"  // what still reaches the backend above light, and the setting that would change it

	// Varnish targets.
	FieldTarget    = "target" // a target's admin address
	FieldVCL       = "vcl"
	FieldFromVCL   = "from_vcl"
	FieldActiveVCL = "active_vcl"
	FieldLabelVCL  = "label_vcl"
	FieldLabel     = "label"
	FieldSite      = "site"     // a site of the config's sites
	FieldExpected  = "expected" // the VCL gearshift left, found changed
	FieldHint      = "hint"
	FieldMissing   = "missing" // profiles to load
	FieldChild     = "child"   // the cache child's state
	FieldRetryIn   = "retry_in"
	FieldDownFor   = "down_for"

	// Hooks.
	FieldHook       = "hook"
	FieldSkipped    = "skipped"
	FieldDurationMS = "duration_ms"
	FieldOutput     = "output"
	FieldTimeout    = "timeout"
	FieldExitCode   = "exit_code"

	// The daemon's start, reloads and signals.
	FieldVersion        = "version"
	FieldPID            = "pid"
	FieldSocket         = "socket"
	FieldTargets        = "targets"
	FieldPollInterval   = "poll_interval"
	FieldCPUs           = "cpus"
	FieldCPUsFrom       = "cpus_from"
	FieldSources        = "sources"
	FieldKey            = "key" // a config key that needs a restart, or that a warning is about
	FieldWarning        = "warning"
	FieldListen         = "listen"
	FieldSignal         = "signal"
	FieldSessionCookies = "session_cookies"

	// The encoder's keys (EncoderConfig).
	keyTime       = "ts"     // TimeKey
	keyLevel      = "level"  // LevelKey
	keyMsg        = "msg"    // MessageKey
	keyName       = "logger" // NameKey
	keyCaller     = "caller" // not written (no CallerKey); skipped if present
	keyStacktrace = "stacktrace"
)
