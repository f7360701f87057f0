// Package pump is the run loop the examples share: the one every mcpwire host has, written
// with a reader goroutine and a timer instead of poll(2).
//
// Each turn: drain events (the handler may issue commands), write all output, re-arm the
// timer from the engine's deadline, then wait for input or the timer and feed it in.
package pump

import (
	"errors"
	"io"
	"time"

	mcpwire "github.com/mcpwire/mcpwire-go"
)

// Run drives conn over in/out until the connection closes (after a ClosedEvent, once the
// output is flushed). handle sees every event first; it runs on this goroutine, so it may
// call any command on conn.
func Run(conn *mcpwire.Conn, in io.Reader, out io.Writer, handle func(now time.Time, ev mcpwire.Event)) error {
	reads := make(chan []byte)
	go func() {
		defer close(reads)
		buf := make([]byte, 64*1024)
		for {
			n, err := in.Read(buf)
			if n > 0 {
				chunk := make([]byte, n)
				copy(chunk, buf[:n])
				reads <- chunk
			}
			if err != nil {
				return
			}
		}
	}()
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	inputOpen := true
	for {
		closed := false
		for ev, ok := conn.NextEvent(); ok; ev, ok = conn.NextEvent() {
			if _, isClosed := ev.(*mcpwire.ClosedEvent); isClosed {
				closed = true
			}
			handle(time.Now(), ev)
		}
		if err := conn.Err(); err != nil {
			return err
		}
		if _, err := conn.WriteTo(out); err != nil {
			return err
		}
		if closed {
			return nil
		}

		if !timer.Stop() {
			select {
			case <-timer.C:
			default:
			}
		}
		var timeout <-chan time.Time
		if deadline, ok := conn.NextDeadline(); ok {
			timer.Reset(time.Until(deadline))
			timeout = timer.C
		}
		var input <-chan []byte
		if inputOpen {
			input = reads
		}
		if input == nil && timeout == nil {
			return errors.New("pump: input ended and no timer is armed")
		}
		select {
		case chunk, ok := <-input:
			if !ok {
				inputOpen = false
				if err := conn.FeedEOF(time.Now()); err != nil {
					return err
				}
				continue
			}
			if err := conn.Feed(time.Now(), chunk); err != nil {
				return err
			}
		case <-timeout:
		}
		if err := conn.HandleTimeout(time.Now()); err != nil {
			return err
		}
	}
}
