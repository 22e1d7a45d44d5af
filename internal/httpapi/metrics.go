package httpapi

import (
	"net/http"
	"strconv"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/microbox/microbox/internal/service"
	"github.com/microbox/microbox/result"
)

// metrics are the server's, in Prometheus's text format at /metrics: the
// runner's verdicts (every run of the server, through the exec socket or
// the API), the service's admission, the jails waiting, the stale groups
// collected, and the API's requests. It is the runner's
// server.Observer.
type metrics struct {
	reg      *prometheus.Registry
	runs     *prometheus.CounterVec
	wall     prometheus.Histogram
	setup    prometheus.Histogram
	stale    prometheus.Counter
	requests *prometheus.CounterVec
}

// runBuckets span a run's wall time, from a bare print (20 ms) to long
// limits; setupBuckets a jail's set-up, from a warm jail's (1 ms) up.
var (
	runBuckets   = []float64{.01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60}
	setupBuckets = []float64{.0005, .001, .002, .005, .01, .02, .05, .1, .25, 1}
)

func newMetrics(svc *service.Service) *metrics {
	m := &metrics{
		reg: prometheus.NewRegistry(),
		runs: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "microbox_runs_total",
			Help: "Runs by verdict (the result's status), through the exec socket or the API."}, []string{"status"}),
		wall: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "microbox_run_duration_seconds",
			Help: "Wall time of runs' programs, from their start (wall_time_ms).", Buckets: runBuckets}),
		setup: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "microbox_setup_duration_seconds",
			Help: "Set-up time of runs' jails before their programs started (setup_time_ms).", Buckets: setupBuckets}),
		stale: prometheus.NewCounter(prometheus.CounterOpts{Name: "microbox_stale_cgroups_collected_total",
			Help: "Cgroups left by killed runs that the server removed."}),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "microbox_http_requests_total",
			Help: "HTTP API requests by path and status code."}, []string{"path", "code"}),
	}
	for _, s := range result.Statuses {
		m.runs.WithLabelValues(string(s)) // every status from the start, at 0
	}
	gauge := func(name, help string, value func(service.Stats) int) prometheus.Collector {
		return prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: name, Help: help},
			func() float64 { return float64(value(svc.Stats())) })
	}
	m.reg.MustRegister(m.runs, m.wall, m.setup, m.stale, m.requests,
		gauge("microbox_queue_length", "API runs waiting for a slot.", func(s service.Stats) int { return s.Queued }),
		gauge("microbox_runs_in_flight", "API runs holding a slot.", func(s service.Stats) int { return s.Running }),
		gauge("microbox_warm_jails", "Jails started ahead, waiting for a run.", func(s service.Stats) int { return s.ReadyJails }),
		gauge("microbox_batches_streaming", "API batches under way.", func(s service.Stats) int { return s.Batches }),
		gauge("microbox_kept_result_bytes", "Bytes of results of runs started with ?wait=false, kept until they expire.", func(s service.Stats) int { return int(s.KeptBytes) }),
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// Verdict counts a run's result (server.Observer).
func (m *metrics) Verdict(r *result.Result) {
	m.runs.WithLabelValues(string(r.Status)).Inc()
	if r.WallTimeMs > 0 {
		m.wall.Observe(r.WallTimeMs / 1000)
	}
	if r.SetupTimeMs > 0 {
		m.setup.Observe(r.SetupTimeMs / 1000)
	}
}

// StaleGroupsCollected counts stale groups removed (server.Observer).
func (m *metrics) StaleGroupsCollected(n int) { m.stale.Add(float64(n)) }

func (m *metrics) serve(w http.ResponseWriter, r *http.Request) {
	promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{}).ServeHTTP(w, r)
}

// instrument counts a path's requests by status code.
func (m *metrics) instrument(path string, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sw := &statusWriter{ResponseWriter: w, code: http.StatusOK}
		next.ServeHTTP(sw, r)
		m.requests.WithLabelValues(path, strconv.Itoa(sw.code)).Inc()
	})
}

// statusWriter notes the status a handler answered.
type statusWriter struct {
	http.ResponseWriter
	code int
}

func (s *statusWriter) WriteHeader(code int) {
	s.code = code
	s.ResponseWriter.WriteHeader(code)
}

// Unwrap lets http.ResponseController reach the connection (flushes,
// deadlines, full duplex).
func (s *statusWriter) Unwrap() http.ResponseWriter { return s.ResponseWriter }
