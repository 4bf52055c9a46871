// @ts-check
/**
 * The Loom agent conversation loop (seed 000), written by hand in JavaScript from the
 * table spec/loom-agent.yaml — an independent implementation, not generated from the
 * Python code. It has the shape a real agent would: an engine that receives events and
 * returns the actions for its caller to perform, with no I/O of its own.
 *
 * Plain JavaScript with JSDoc types (checked by `tsc --checkJs` if you have it), so Node
 * runs it as is: no build step, no dependencies.
 */

/** Limits of the table's constants. */
export const MAX_RETRIES = 3;
export const MAX_TOOLS = 2;

/**
 * @typedef {"WaitingForUserInput" | "CallingLlm" | "ExecutingTools" | "PostToolsHook"
 *   | "Error" | "ShuttingDown"} ObservableState
 * @typedef {{ accepted: boolean, state: ObservableState, actions: string[] }} Outcome
 * @typedef {Record<string, number | boolean>} Params
 */

/** Events and their parameters: name -> parameter name -> validator. */
export const EVENTS = /** @type {const} */ ({
  UserInput: {},
  TextDelta: {},
  ToolCallDelta: {},
  LlmCompleted: { tool_calls: isToolCount },
  LlmError: {},
  ToolProgress: {},
  ToolCompleted: { mutating: isBool },
  PostToolsHookCompleted: { action_taken: isBool },
  RetryTimeoutFired: {},
  ShutdownRequested: {},
});

/** @param {unknown} v */
function isToolCount(v) {
  return Number.isInteger(v) && typeof v === "number" && v >= 0 && v <= MAX_TOOLS;
}

/** @param {unknown} v */
function isBool(v) {
  return typeof v === "boolean";
}

/**
 * Check an event name and its parameters; return an error message or "" when fine.
 * @param {string} event
 * @param {unknown} params
 */
export function validate(event, params) {
  if (!Object.hasOwn(EVENTS, event)) return `unknown event ${JSON.stringify(event)}`;
  if (typeof params !== "object" || params === null || Array.isArray(params)) return "params must be an object";
  const spec = /** @type {Record<string, (v: unknown) => boolean>} */ (EVENTS[/** @type {keyof typeof EVENTS} */ (event)]);
  const given = /** @type {Record<string, unknown>} */ (params);
  for (const name of Object.keys(given)) {
    if (!Object.hasOwn(spec, name)) return `event ${event} has no parameter ${name}`;
  }
  for (const [name, ok] of Object.entries(spec)) {
    if (!ok(given[name])) return `bad or missing parameter ${name} of ${event}`;
  }
  return "";
}

export class LoomAgent {
  constructor() {
    /** @type {ObservableState} */
    this.state = "WaitingForUserInput";
    /** retry attempts made for the current LLM request */
    this.retries = 0;
    /** tool executions not yet completed */
    this.pending = 0;
    /** a completed tool of this batch modified the workspace */
    this.mutated = false;
  }

  vars() {
    return { retries: this.retries, pending: this.pending, mutated: this.mutated };
  }

  /**
   * Deliver one (validated) event; return whether it was accepted, the new state and the
   * actions the caller must perform, in order.
   * @param {string} event
   * @param {Params} params
   * @returns {Outcome}
   */
  step(event, params) {
    if (this.state === "ShuttingDown") return { accepted: false, state: this.state, actions: [] };
    if (event === "ShutdownRequested") return this.go("ShuttingDown", ["Shutdown"]);
    switch (this.state) {
      case "WaitingForUserInput":
        if (event === "UserInput") {
          this.retries = 0;
          return this.go("CallingLlm", ["SendLlmRequest"]);
        }
        break;
      case "CallingLlm":
        switch (event) {
          case "TextDelta":
            return this.go("CallingLlm", ["DisplayMessage"]);
          case "ToolCallDelta":
            return this.go("CallingLlm", ["WaitForInput"]);
          case "LlmCompleted":
            this.retries = 0;
            this.pending = /** @type {number} */ (params.tool_calls);
            this.mutated = false;
            return this.processResponse();
          case "LlmError":
            if (this.retries < MAX_RETRIES) {
              this.retries += 1;
              return this.go("Error", ["WaitForInput"]);
            }
            this.retries = 0;
            return this.go("WaitingForUserInput", ["DisplayError"]);
        }
        break;
      case "ExecutingTools":
        if (event === "ToolProgress") return this.go("ExecutingTools", ["WaitForInput"]);
        if (event === "ToolCompleted") return this.toolCompleted(/** @type {boolean} */ (params.mutating));
        break;
      case "PostToolsHook":
        if (event === "PostToolsHookCompleted") {
          this.mutated = false;
          return this.go("CallingLlm", ["SendLlmRequest"]);
        }
        break;
      case "Error":
        if (event === "RetryTimeoutFired") return this.go("CallingLlm", ["SendLlmRequest"]);
        break;
    }
    // "Invalid transitions log a warning and return WaitForInput": rejected, no change.
    return { accepted: false, state: this.state, actions: ["WaitForInput"] };
  }

  /** ProcessingLlmResponse is transient: decided at once, inside the same step. */
  processResponse() {
    if (this.pending > 0) return this.go("ExecutingTools", ["ExecuteTools"]);
    return this.go("WaitingForUserInput", ["WaitForInput"]);
  }

  /** @param {boolean} mutating */
  toolCompleted(mutating) {
    const mutated = this.mutated || mutating;
    if (this.pending > 1) {
      this.pending -= 1;
      this.mutated = mutated;
      return this.go("ExecutingTools", ["WaitForInput"]);
    }
    this.pending = 0;
    if (mutated) {
      this.mutated = true;
      return this.go("PostToolsHook", ["RunPostToolsHook"]);
    }
    return this.go("CallingLlm", ["SendLlmRequest"]);
  }

  /**
   * @param {ObservableState} state
   * @param {string[]} actions
   * @returns {Outcome}
   */
  go(state, actions) {
    this.state = state;
    return { accepted: true, state, actions };
  }
}
