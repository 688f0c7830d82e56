package console

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"net/http"
	"strings"
	"sync"
	"time"
)

// sessionCookie names the session cookie; sessionTTL is how long a session lives; maxSessions bounds the
// sessions kept (the oldest goes first).
const (
	// maxLoginBody bounds what /login reads before the token is checked (the only body read unauthenticated).
	maxLoginBody  = 8 << 10
	sessionCookie = "rmqguard_console"
	sessionTTL    = 12 * time.Hour
	maxSessions   = 1000
)

// session is one logged-in browser, with its CSRF token; or a Bearer request (bearer true), which is kept
// nowhere and needs no CSRF token: a browser never sends an Authorization header on its own.
type session struct {
	id, csrf string
	created  time.Time
	bearer   bool
}

// sessions are the live sessions, by ID.
type sessions struct {
	mu   sync.Mutex
	byID map[string]session
}

func newSessions() *sessions { return &sessions{byID: map[string]session{}} }

// get returns the live session id.
func (s *sessions) get(id string, now time.Time) (session, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	sess, ok := s.byID[id]
	if ok && now.Sub(sess.created) > sessionTTL {
		delete(s.byID, id)
		return session{}, false
	}
	return sess, ok
}

// create starts a session, dropping expired ones and, at maxSessions, the oldest.
func (s *sessions) create(now time.Time) (session, error) {
	id, err := randomHex()
	if err != nil {
		return session{}, err
	}
	csrf, err := randomHex()
	if err != nil {
		return session{}, err
	}
	sess := session{id: id, csrf: csrf, created: now}
	s.mu.Lock()
	defer s.mu.Unlock()
	var oldest string
	for k, v := range s.byID {
		if now.Sub(v.created) > sessionTTL {
			delete(s.byID, k)
		} else if oldest == "" || v.created.Before(s.byID[oldest].created) {
			oldest = k
		}
	}
	if len(s.byID) >= maxSessions {
		delete(s.byID, oldest)
	}
	s.byID[id] = sess
	return sess, nil
}

// drop ends session id.
func (s *sessions) drop(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.byID, id)
}

// randomHex returns 32 random bytes in hex.
func randomHex() (string, error) {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	return hex.EncodeToString(b), nil
}

// tokenOK compares got with the token in constant time (of their hashes, so that the length does not show).
func (c *Console) tokenOK(got string) bool {
	a, b := sha256.Sum256([]byte(got)), sha256.Sum256([]byte(c.cfg.Token))
	return subtle.ConstantTimeCompare(a[:], b[:]) == 1
}

// setCookie sends the session's cookie; maxAge < 0 deletes it.
func setCookie(w http.ResponseWriter, id string, maxAge int) {
	http.SetCookie(w, &http.Cookie{Name: sessionCookie, Value: id, Path: "/", MaxAge: maxAge,
		HttpOnly: true, SameSite: http.SameSiteStrictMode})
}

// authed runs next for a request with a live session cookie or the token as Bearer (a session of that
// request alone); anything else gets 401 and the login form.
func (c *Console) authed(next handler) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		now := time.Now()
		if ck, err := r.Cookie(sessionCookie); err == nil {
			if s, ok := c.sessions.get(ck.Value, now); ok {
				next(w, r, s)
				return
			}
		}
		if tok, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer "); ok && c.tokenOK(strings.TrimSpace(tok)) {
			next(w, r, session{bearer: true, created: now})
			return
		}
		w.Header().Set("WWW-Authenticate", `Bearer realm="rmqguard console"`)
		c.render(w, http.StatusUnauthorized, "login", view{Title: "Log in", Page: loginData{Message: "An access token is required."}})
	}
}

// post checks the form's CSRF token against the session's (403 otherwise); a Bearer request needs none.
func (c *Console) post(next handler) handler {
	return func(w http.ResponseWriter, r *http.Request, s session) {
		if s.bearer {
			next(w, r, s)
			return
		}
		got := r.PostFormValue("csrf")
		if got == "" || subtle.ConstantTimeCompare([]byte(got), []byte(s.csrf)) != 1 {
			c.fail(w, r, s, http.StatusForbidden, errors.New("missing or wrong CSRF token: reload the page and submit again"))
			return
		}
		next(w, r, s)
	}
}

// loginData is the login page's data.
type loginData struct{ Message string }

func (c *Console) loginPage(w http.ResponseWriter, _ *http.Request) {
	c.render(w, http.StatusOK, "login", view{Title: "Log in", Page: loginData{}})
}

// login starts a session for the right token and redirects to the groups page.
func (c *Console) login(w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, maxLoginBody)
	if !c.tokenOK(r.PostFormValue("token")) {
		c.render(w, http.StatusUnauthorized, "login", view{Title: "Log in", Page: loginData{Message: "Wrong access token."}})
		return
	}
	s, err := c.sessions.create(time.Now())
	if err != nil {
		http.Error(w, "session: "+err.Error(), http.StatusInternalServerError)
		return
	}
	setCookie(w, s.id, int(sessionTTL/time.Second))
	http.Redirect(w, r, "/", http.StatusSeeOther)
}

// logout ends the session.
func (c *Console) logout(w http.ResponseWriter, r *http.Request, s session) {
	c.sessions.drop(s.id)
	setCookie(w, "", -1)
	http.Redirect(w, r, "/login", http.StatusSeeOther)
}
