package api

import (
	"context"
	"errors"
	"net/http"
	"regexp"
	"runtime/debug"

	"github.com/oklog/ulid/v2"
)

// requestIDHeader carries the request's id both ways: a caller (or a gateway in front) may
// send one, and every answer names the one used, so a report can be matched to a log line.
const requestIDHeader = "X-Request-Id"

// acceptedRequestID bounds what a caller may choose as an id: it ends up in logs, so no
// control characters and nothing long.
var acceptedRequestID = regexp.MustCompile(`^[A-Za-z0-9._:-]{1,128}$`)

type requestIDKey struct{}

// requestID is the id of the request ctx belongs to ("" outside the server).
func requestID(ctx context.Context) string {
	id, _ := ctx.Value(requestIDKey{}).(string)
	return id
}

// recordingWriter notes whether the answer has started, so that a panic after the first byte
// is not followed by a second status line.
type recordingWriter struct {
	http.ResponseWriter
	wrote bool
}

func (w *recordingWriter) WriteHeader(code int) {
	w.wrote = true
	w.ResponseWriter.WriteHeader(code)
}

func (w *recordingWriter) Write(b []byte) (int, error) {
	w.wrote = true
	return w.ResponseWriter.Write(b)
}

// Flush keeps streaming handlers working through the wrapper.
func (w *recordingWriter) Flush() {
	w.wrote = true
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// Unwrap lets http.ResponseController reach the connection (per-request deadlines).
func (w *recordingWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// guard gives every request an id and turns a handler's panic into a logged 500 problem: the
// stack goes to the log under the request id, the caller gets the id and no detail, and the
// server goes on serving.
func (s *Server) guard(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := r.Header.Get(requestIDHeader)
		if !acceptedRequestID.MatchString(id) {
			id = ulid.Make().String()
		}
		w.Header().Set(requestIDHeader, id)
		r = r.WithContext(context.WithValue(r.Context(), requestIDKey{}, id))
		rw := &recordingWriter{ResponseWriter: w}
		defer func() {
			v := recover()
			if v == nil {
				return
			}
			if err, ok := v.(error); ok && errors.Is(err, http.ErrAbortHandler) {
				panic(v) // the handler's own way to drop the connection
			}
			s.log.Error("handler panicked", "request_id", id, "method", r.Method, "path", r.URL.Path,
				"panic", v, "stack", string(debug.Stack()))
			s.panics.Inc()
			if rw.wrote {
				// Part of an answer is out: the only honest end is a cut connection.
				panic(http.ErrAbortHandler)
			}
			writeProblem(rw, r, problem(http.StatusInternalServerError, "internal error; the server log has details under request id "+id))
		}()
		next.ServeHTTP(rw, r)
	})
}
