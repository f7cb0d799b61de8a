package render

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"time"
)

// conn speaks the Chrome DevTools Protocol over the two pipes of --remote-debugging-pipe: the
// browser reads NUL-terminated JSON commands from its fd 3 and writes replies and events to
// its fd 4. One reader goroutine dispatches replies to the waiting call and events to the
// sink registered for their session. conn is safe for simultaneous use by multiple
// goroutines.
type conn struct {
	w *os.File // commands to the browser
	r *os.File // replies and events from the browser

	wmu sync.Mutex // serialises writes of whole messages

	mu       sync.Mutex
	next     int64
	pending  map[int64]chan message
	sinks    map[string]*sink // by session id; "" is the browser's own session
	readErr  error
	readDone chan struct{} // closed when the reader stops (the browser closed its end or died)
}

// message is any CDP message: a command (ID, Method, Params), its reply (ID, Result or
// Error) or an event (Method, Params), each optionally for a session.
type message struct {
	ID        int64           `json:"id,omitempty"`
	SessionID string          `json:"sessionId,omitempty"`
	Method    string          `json:"method,omitempty"`
	Params    json.RawMessage `json:"params,omitempty"`
	Result    json.RawMessage `json:"result,omitempty"`
	Error     *cdpError       `json:"error,omitempty"`
}

type cdpError struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
}

func (e *cdpError) Error() string { return fmt.Sprintf("cdp error %d: %s", e.Code, e.Message) }

// Bounds on what the browser can make this process hold.
const (
	maxMessage    = 256 << 20 // one CDP message (a serialised DOM travels in one)
	maxSinkEvents = 100_000   // events queued and not yet handled for one render
	writeTimeout  = 10 * time.Second
)

// errBrowserGone is returned by call when the browser's pipe is closed.
var errBrowserGone = errors.New("browser connection closed")

func newConn(w, r *os.File) *conn {
	c := &conn{w: w, r: r, pending: map[int64]chan message{}, sinks: map[string]*sink{},
		readDone: make(chan struct{})}
	go c.readLoop()
	return c
}

func (c *conn) readLoop() {
	br := bufio.NewReaderSize(c.r, 64<<10)
	var buf bytes.Buffer
	var err error
	for {
		var frag []byte
		frag, err = br.ReadSlice(0)
		if err == bufio.ErrBufferFull {
			if buf.Len()+len(frag) > maxMessage {
				err = fmt.Errorf("browser sent a message over %d bytes", maxMessage)
				break
			}
			buf.Write(frag)
			continue
		}
		if err != nil {
			break
		}
		var raw []byte
		if buf.Len() > 0 {
			if buf.Len()+len(frag) > maxMessage {
				err = fmt.Errorf("browser sent a message over %d bytes", maxMessage)
				break
			}
			buf.Write(frag[:len(frag)-1])
			raw = buf.Bytes()
		} else {
			raw = frag[:len(frag)-1]
		}
		var m message
		if jerr := json.Unmarshal(raw, &m); jerr != nil {
			err = fmt.Errorf("browser sent a message that is not JSON: %w", jerr)
			break
		}
		buf.Reset()
		if buf.Cap() > 1<<20 {
			buf = bytes.Buffer{} // do not keep a DOM-sized buffer for the next small messages
		}
		c.dispatch(m)
	}
	if err == io.EOF {
		err = errBrowserGone
	}
	c.mu.Lock()
	c.readErr = err
	c.mu.Unlock()
	close(c.readDone)
}

func (c *conn) dispatch(m message) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if m.ID != 0 {
		if ch, ok := c.pending[m.ID]; ok {
			delete(c.pending, m.ID)
			ch <- m // buffered, one reply per id
		}
		return
	}
	s := c.sinks[m.SessionID]
	if s == nil {
		return
	}
	if m.Method == "Target.attachedToTarget" {
		// A child of a render's target (a frame or worker) reports to the same sink, from its
		// first event on.
		var p struct {
			SessionID string `json:"sessionId"`
		}
		if json.Unmarshal(m.Params, &p) == nil && p.SessionID != "" {
			c.sinks[p.SessionID] = s
			s.sessions = append(s.sessions, p.SessionID)
		}
	}
	s.push(m)
}

// err returns why the reader stopped, or nil while it runs.
func (c *conn) err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.readErr
}

// call sends method with params to the session (or the browser when session is "") and
// decodes the reply's result into result (unless nil). It returns when the reply arrives,
// ctx ends or the browser's pipe closes.
func (c *conn) call(ctx context.Context, session, method string, params, result any) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	var p json.RawMessage
	if params != nil {
		b, err := json.Marshal(params)
		if err != nil {
			return err
		}
		p = b
	}
	ch := make(chan message, 1)
	c.mu.Lock()
	if c.readErr != nil {
		c.mu.Unlock()
		return errBrowserGone
	}
	c.next++
	id := c.next
	c.pending[id] = ch
	c.mu.Unlock()
	forget := func() {
		c.mu.Lock()
		delete(c.pending, id)
		c.mu.Unlock()
	}
	b, err := json.Marshal(message{ID: id, SessionID: session, Method: method, Params: p})
	if err != nil {
		forget()
		return err
	}
	b = append(b, 0)
	c.wmu.Lock()
	c.w.SetWriteDeadline(time.Now().Add(writeTimeout))
	_, err = c.w.Write(b)
	c.wmu.Unlock()
	if err != nil {
		forget()
		return fmt.Errorf("%s: writing to the browser: %w", method, err)
	}
	select {
	case m := <-ch:
		if m.Error != nil {
			return fmt.Errorf("%s: %w", method, m.Error)
		}
		if result != nil && len(m.Result) > 0 {
			if err := json.Unmarshal(m.Result, result); err != nil {
				return fmt.Errorf("%s: decoding the reply: %w", method, err)
			}
		}
		return nil
	case <-ctx.Done():
		forget()
		return ctx.Err()
	case <-c.readDone:
		forget()
		return errBrowserGone
	}
}

// register makes s receive the events of session (and of the sessions attached under it).
func (c *conn) register(session string, s *sink) {
	c.mu.Lock()
	c.sinks[session] = s
	s.sessions = append(s.sessions, session)
	c.mu.Unlock()
}

// unregister stops delivering events to s.
func (c *conn) unregister(s *sink) {
	c.mu.Lock()
	for _, id := range s.sessions {
		if c.sinks[id] == s {
			delete(c.sinks, id)
		}
	}
	c.mu.Unlock()
}

// sink queues the events of one render for its own goroutine, so the reader never waits for
// a render. The queue is bounded by maxSinkEvents; past it events are dropped and overflow is
// set (the render then ends as cut).
type sink struct {
	sessions []string // guarded by conn.mu

	mu       sync.Mutex
	q        []message
	overflow bool
	wake     chan struct{} // capacity 1: "the queue may be non-empty"
}

func newSink() *sink { return &sink{wake: make(chan struct{}, 1)} }

func (s *sink) push(m message) {
	s.mu.Lock()
	if len(s.q) >= maxSinkEvents {
		s.overflow = true
	} else {
		s.q = append(s.q, m)
	}
	s.mu.Unlock()
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// take returns the queued events and empties the queue.
func (s *sink) take() ([]message, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	q := s.q
	s.q = nil
	return q, s.overflow
}
