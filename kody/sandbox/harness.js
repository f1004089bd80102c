// The program every sandbox process runs: it waits for ONE "run" line on stdin, runs that code,
// answers ONE "done" line on stdout and exits. The process has no permissions (no read, write,
// env, run, ffi, sys or net), so everything from outside — capabilities and fetch — is a
// request line to the host, which owns the channel. Each line this side writes carries the
// run's nonce, held only in this closure, so code that writes to stdout itself cannot forge a
// request or an answer.

const encoder = new TextEncoder();
const decoder = new TextDecoder();
const stdout = Deno.stdout;
const reader = Deno.stdin.readable.getReader();
const pending = new Map();
let nonce = "";
let nextId = 1;
let buffered = "";
let moduleUrl = "";
let maxRequestBytes = 2_000_000;

function send(message) {
  const line = JSON.stringify({ ...message, n: nonce }) + "\n";
  const bytes = encoder.encode(line);
  let written = 0;
  while (written < bytes.length) written += stdout.writeSync(bytes.subarray(written));
}

async function nextLine() {
  for (;;) {
    const cut = buffered.indexOf("\n");
    if (cut >= 0) {
      const line = buffered.slice(0, cut);
      buffered = buffered.slice(cut + 1);
      return JSON.parse(line);
    }
    const { value, done } = await reader.read();
    if (done) return null;
    buffered += decoder.decode(value, { stream: true });
  }
}

class KodyError extends Error {
  constructor(error) {
    super(error.message);
    this.name = "KodyError";
    this.code = error.code;
    this.details = error.details || {};
  }
}

function request(op, payload) {
  const id = nextId++;
  return new Promise((resolve, reject) => {
    pending.set(id, { resolve, reject });
    send({ op, id, ...payload });
  });
}

async function pumpReplies() {
  for (;;) {
    const message = await nextLine();
    if (message === null) return;
    const waiter = pending.get(message.id);
    if (!waiter) continue;
    pending.delete(message.id);
    if (message.ok) waiter.resolve(message.value);
    else waiter.reject(new KodyError(message.error));
  }
}

function decodeBase64(text) {
  const raw = atob(text);
  const bytes = new Uint8Array(raw.length);
  for (let i = 0; i < raw.length; i++) bytes[i] = raw.charCodeAt(i);
  return bytes;
}

function encodeBase64(bytes) {
  let raw = "";
  for (let i = 0; i < bytes.length; i += 8192) {
    raw += String.fromCharCode(...bytes.subarray(i, i + 8192));
  }
  return btoa(raw);
}

async function bridgedFetch(input, init = {}) {
  const url = typeof input === "string" ? input : input instanceof URL ? input.href : input.url;
  const headers = {};
  new Headers(init.headers || {}).forEach((value, key) => (headers[key] = value));
  // A string body travels as text (the host fills secret placeholders in it); bytes travel
  // as base64 and are sent exactly as they are.
  let body = null;
  let bodyBase64 = null;
  const given = init.body;
  if (given !== undefined && given !== null) {
    if (typeof given === "string") body = given;
    else if (given instanceof URLSearchParams) {
      body = given.toString();
      if (!("content-type" in headers)) {
        headers["content-type"] = "application/x-www-form-urlencoded;charset=UTF-8";
      }
    } else if (given instanceof ArrayBuffer) bodyBase64 = encodeBase64(new Uint8Array(given));
    else if (ArrayBuffer.isView(given)) {
      bodyBase64 = encodeBase64(new Uint8Array(given.buffer, given.byteOffset, given.byteLength));
    } else if (given instanceof Blob) {
      bodyBase64 = encodeBase64(new Uint8Array(await given.arrayBuffer()));
      if (given.type && !("content-type" in headers)) headers["content-type"] = given.type;
    } else {
      throw new TypeError(
        "fetch body must be a string, URLSearchParams, ArrayBuffer, typed array or Blob here",
      );
    }
  }
  // An oversized body is not sent over the channel at all: the host answers fetch_refused.
  const size = body !== null ? body.length : bodyBase64 !== null ? (bodyBase64.length * 3) / 4 : 0;
  const tooLarge = size > maxRequestBytes ? Math.ceil(size) : null;
  const answer = await request("fetch", {
    url,
    method: init.method || "GET",
    headers,
    body: tooLarge ? null : body,
    bodyBase64: tooLarge ? null : bodyBase64,
    bodyTooLarge: tooLarge,
  });
  return new Response(answer.status === 204 ? null : decodeBase64(answer.body), {
    status: answer.status,
    headers: answer.headers,
  });
}

const kody = new Proxy(Object.freeze({}), {
  get(_target, name) {
    if (typeof name !== "string" || name === "then") return undefined;
    return (args = {}) => request("call", { name, args });
  },
});

// The call's own bucket (exec:{uuid}, package:{id}, job:{id}); set from the run line.
let storageId = null;
const storage = Object.freeze({
  get: async (key) => (await request("call", { name: "storageGet", args: { storageId, key } })).value,
  set: (key, value) => request("call", { name: "storageSet", args: { storageId, key, value } }),
  delete: (key) => request("call", { name: "storageDelete", args: { storageId, key } }),
  list: (options = {}) => request("call", { name: "storageList", args: { ...options, storageId } }),
  query: (sql, params = []) =>
    request("call", { name: "storageQuery", args: { storageId, sql, params } }),
});

const logs = [];
const LOG_LIMIT = 200;
function keep(level) {
  return (...items) => {
    if (logs.length >= LOG_LIMIT) return;
    const text = items
      .map((item) => {
        if (typeof item === "string") return item;
        try {
          return JSON.stringify(item);
        } catch {
          return String(item);
        }
      })
      .join(" ");
    logs.push({ level, message: text.slice(0, 2000) });
  };
}

function moduleSource(code) {
  // An ES module with a default export runs as it is; anything else is an async function
  // expression and becomes one.
  if (/(^|[\s;])export\s+default\s/.test(code)) return code;
  return `export default (${code}\n);`;
}

function describe(error) {
  if (error instanceof KodyError) {
    return { code: error.code, message: error.message, details: error.details };
  }
  const name = error && error.name ? String(error.name) : "Error";
  const message = error && error.message !== undefined ? String(error.message) : String(error);
  // The stack is the code's own frames: the harness's frames would only show host paths.
  const stack = error && error.stack
    ? String(error.stack).replaceAll(moduleUrl, "<code>").split("\n")
      .filter((line) => !line.includes("harness.js")).join("\n")
    : "";
  return { name, message: message.slice(0, 1000), stack: stack.slice(0, 2000) };
}

async function main() {
  const run = await nextLine();
  if (run === null || run.op !== "run") return;
  nonce = run.nonce;
  storageId = run.storageId;
  maxRequestBytes = run.maxRequestBytes ?? maxRequestBytes;
  globalThis.kody = kody;
  globalThis.storage = storage;
  globalThis.fetch = bridgedFetch;
  for (const level of ["log", "info", "warn", "error", "debug"]) console[level] = keep(level);
  pumpReplies();
  try {
    // A published bundle is a finished ES module; ad hoc code may be TypeScript.
    const source = run.module ? run.code : moduleSource(run.code);
    const mime = run.module ? "application/javascript" : "application/typescript";
    moduleUrl = `data:${mime};base64,` + encodeBase64(encoder.encode(source));
    const module = await import(moduleUrl);
    const entry = module.default;
    if (typeof entry !== "function") {
      throw new TypeError("The code must be an async function or export one as default.");
    }
    const result = await entry(run.params ?? {}, { kody, storage, storageId });
    const json = JSON.stringify(result === undefined ? null : result);
    if (json.length > run.maxResultChars) {
      send({ op: "done", ok: false, logs, error: { code: "execute_result_too_large" } });
    } else {
      send({ op: "done", ok: true, logs, result: json });
    }
  } catch (error) {
    send({ op: "done", ok: false, logs, error: describe(error) });
  }
  Deno.exit(0);
}

await main();
