// Preloaded into the conformance suite's Node (node --import): every HTTP request it sends to the server
// under test (through fetch, undici or node:http, the suite uses all three) carries "Authorization: Bearer $MCP_CONFORMANCE_BEARER". The suite has no option for a
// server that needs a token, and graphadmin's MCP endpoint refuses any request without one (401).
// Only the Authorization header is added: Host, Origin and every other header the suite sets (the
// DNS-rebinding and header-validation scenarios set them on purpose) reach the server unchanged.
// Requests to any other origin than $MCP_CONFORMANCE_URL's get nothing.
import http from "node:http";
import { createRequire } from "node:module";
import { pathToFileURL } from "node:url";

const token = process.env.MCP_CONFORMANCE_BEARER;
const target = process.env.MCP_CONFORMANCE_URL;
if (!token || !target) {
  throw new Error("bearer.mjs needs MCP_CONFORMANCE_BEARER and MCP_CONFORMANCE_URL");
}
// The undici the suite itself resolves (process.argv[1] is its entry point), so one global dispatcher
// serves both its undici.request calls and Node's fetch (which the MCP SDK's client transport uses).
const { Agent, setGlobalDispatcher } = createRequire(pathToFileURL(process.argv[1]))("undici");
const origin = new URL(target).origin;
const value = `Bearer ${token}`;

function hasAuthorization(names) {
  return names.some((name) => String(name).toLowerCase() === "authorization");
}

// undici passes headers as a flat [name, value, ...] array, an array of pairs, or a plain object.
function withBearer(headers) {
  if (headers == null) return { authorization: value };
  if (Array.isArray(headers)) {
    if (headers.length > 0 && Array.isArray(headers[0])) {
      return hasAuthorization(headers.map(([name]) => name)) ? headers : [...headers, ["authorization", value]];
    }
    const names = headers.filter((_, i) => i % 2 === 0);
    return hasAuthorization(names) ? headers : [...headers, "authorization", value];
  }
  if (typeof headers[Symbol.iterator] === "function") return withBearer([...headers]);
  return hasAuthorization(Object.keys(headers)) ? headers : { ...headers, authorization: value };
}

setGlobalDispatcher(
  new Agent().compose((dispatch) => (opts, handler) => {
    const to = opts.origin instanceof URL ? opts.origin.origin : new URL(String(opts.origin)).origin;
    return dispatch(to === origin ? { ...opts, headers: withBearer(opts.headers) } : opts, handler);
  }),
);

// node:http's request(options[, callback]), the form the suite uses for its raw header-validation requests.
const request = http.request;
http.request = function requestWithBearer(options, ...rest) {
  if (options && typeof options === "object" && !(options instanceof URL)) {
    const to = `${options.protocol || "http:"}//${options.hostname || options.host}${options.port ? `:${options.port}` : ""}`;
    if (to === origin) options = { ...options, headers: withBearer(options.headers) };
  }
  return request.call(this, options, ...rest);
};
