// The service's /v1 routes, called with the token kept in sessionStorage (never in a URL).
const TOKEN_KEY = "helix-dbos.token";

export function token() {
  return sessionStorage.getItem(TOKEN_KEY);
}

export function setToken(value) {
  if (value) sessionStorage.setItem(TOKEN_KEY, value);
  else sessionStorage.removeItem(TOKEN_KEY);
}

/** An error answered by the service: its code, HTTP status and the message it is safe to show. */
export class ApiError extends Error {
  constructor(status, code, message) {
    super(message);
    this.status = status;
    this.code = code;
  }
}

export function authHeaders(extra = {}) {
  const headers = { ...extra };
  const t = token();
  if (t) headers.Authorization = `Bearer ${t}`;
  return headers;
}

export async function api(path, { method = "GET", body, query } = {}) {
  let url = `/v1${path}`;
  if (query) {
    const params = new URLSearchParams();
    for (const [k, v] of Object.entries(query)) if (v !== undefined && v !== null && v !== "") params.set(k, v);
    const text = params.toString();
    if (text) url += `?${text}`;
  }
  const init = { method, headers: authHeaders({ Accept: "application/json" }) };
  if (body !== undefined) {
    init.headers["Content-Type"] = "application/json";
    init.body = JSON.stringify(body);
  }
  let response;
  try {
    response = await fetch(url, init);
  } catch (err) {
    throw new ApiError(0, "network", `The service cannot be reached (${err.message}).`);
  }
  const text = await response.text();
  let data = null;
  try {
    data = text ? JSON.parse(text) : null;
  } catch {
    data = null;
  }
  if (!response.ok) {
    const error = data && data.error ? data.error : {};
    let message = error.message || `${response.status} ${response.statusText}`;
    if (response.status === 401) message = "The service refused this token (401). Log in again with a valid one.";
    throw new ApiError(response.status, error.code || "http_" + response.status, message);
  }
  return data;
}
