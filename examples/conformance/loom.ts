/**
 * The Loom agent conversation loop (seed 000), written by hand in TypeScript from the
 * table spec/loom-agent.yaml: an independent implementation, not generated from the table
 * or from the Python code.
 *
 * It has the shape of the seed's Rust: the state is a discriminated union whose variants
 * carry their own data, and `handleEvent` matches on (state, event) and returns the
 * actions for the caller to perform. The engine does no I/O and never waits.
 */

/** The table's constants: retry attempts for one operation, tool calls in one response. */
export const MAX_RETRIES = 3;
export const MAX_TOOLS = 2;

/**
 * What failed, in Error (the seed's `ErrorOrigin`); it decides what the retry timer retries:
 * the LLM request, the tool calls that could not be executed, or the post-tools hook.
 */
export type ErrorOrigin = "Llm" | "Tool" | "Io";

/**
 * The states a caller can observe. ProcessingLlmResponse is transient (it "immediately
 * transitions"), so it is not a variant but a function, `processLlmResponse`: the type
 * system then guarantees the agent never rests in it.
 */
export type AgentState =
  | { readonly kind: "WaitingForUserInput" }
  /** `retries`: retry attempts made for the current LLM request. */
  | { readonly kind: "CallingLlm"; readonly retries: number }
  /**
   * `pending`: executions not yet settled (at least one); `failed`: settled ones that could not be
   * executed; `mutated`: a completed one modified the workspace; `retries`: retries of this batch.
   */
  | {
      readonly kind: "ExecutingTools";
      readonly pending: number;
      readonly failed: number;
      readonly mutated: boolean;
      readonly retries: number;
    }
  /** Entered only after a batch with a mutating tool; `retries`: retries of the hook. */
  | { readonly kind: "PostToolsHook"; readonly retries: number }
  /** A failure waiting for its retry timer; keeps the retry count, and what to retry. */
  | { readonly kind: "Error"; readonly origin: "Llm"; readonly retries: number }
  /** `failed`: the calls to run again; `mutated`: a completed call of the batch modified the workspace. */
  | {
      readonly kind: "Error";
      readonly origin: "Tool";
      readonly retries: number;
      readonly failed: number;
      readonly mutated: boolean;
    }
  | { readonly kind: "Error"; readonly origin: "Io"; readonly retries: number }
  /** Terminal: the agent is dropped. */
  | { readonly kind: "ShuttingDown" };

/** The seed's LlmEvent sub-variants, reduced to what decides transitions. */
export type LlmEvent =
  | { readonly kind: "TextDelta" }
  | { readonly kind: "ToolCallDelta" }
  | { readonly kind: "Completed"; readonly toolCalls: number }
  | { readonly kind: "Error" };

export type AgentEvent =
  | { readonly kind: "UserInput" }
  | { readonly kind: "LlmEvent"; readonly event: LlmEvent }
  | { readonly kind: "ToolProgress" }
  | { readonly kind: "ToolCompleted"; readonly mutating: boolean }
  /** A tool call could not be executed at all (not the tool's own error); safe to run again. */
  | { readonly kind: "ToolExecutionFailed" }
  | { readonly kind: "PostToolsHookCompleted"; readonly actionTaken: boolean }
  | { readonly kind: "PostToolsHookFailed" }
  | { readonly kind: "RetryTimeoutFired" }
  | { readonly kind: "ShutdownRequested" };

export type AgentAction =
  | "SendLlmRequest"
  | "ExecuteTools"
  | "RunPostToolsHook"
  | "WaitForInput"
  | "DisplayMessage"
  | "DisplayError"
  | "Shutdown";

/** What one event did: whether the agent accepted it, and the actions in order. */
export interface Outcome {
  readonly accepted: boolean;
  readonly actions: readonly AgentAction[];
}

/** The agent: owns its state, as the seed's `Agent` does; `handleEvent` is synchronous. */
export class Agent {
  #state: AgentState = { kind: "WaitingForUserInput" };

  get state(): AgentState {
    return this.#state;
  }

  handleEvent(event: AgentEvent): Outcome {
    const [next, outcome] = transition(this.#state, event);
    this.#state = next;
    return outcome;
  }
}

/** The next state and the outcome of delivering `event` in `state`; a pure function. */
export function transition(state: AgentState, event: AgentEvent): readonly [AgentState, Outcome] {
  if (state.kind === "ShuttingDown") return [state, { accepted: false, actions: [] }];
  if (event.kind === "ShutdownRequested") return accept({ kind: "ShuttingDown" }, "Shutdown");
  switch (state.kind) {
    case "WaitingForUserInput":
      if (event.kind === "UserInput") return accept({ kind: "CallingLlm", retries: 0 }, "SendLlmRequest");
      break;
    case "CallingLlm":
      if (event.kind === "LlmEvent") return llmEvent(state, event.event);
      break;
    case "ExecutingTools":
      if (event.kind === "ToolProgress") return accept(state, "WaitForInput");
      if (event.kind === "ToolCompleted") return toolSettled(state, state.mutated || event.mutating, 0);
      if (event.kind === "ToolExecutionFailed") return toolSettled(state, state.mutated, 1);
      break;
    case "PostToolsHook":
      if (event.kind === "PostToolsHookCompleted") return accept({ kind: "CallingLlm", retries: 0 }, "SendLlmRequest");
      if (event.kind === "PostToolsHookFailed") return hookFailed(state.retries);
      break;
    case "Error":
      if (event.kind === "RetryTimeoutFired") return retry(state);
      break;
    default:
      return unreachable(state);
  }
  // The catch-all: "Invalid transitions log a warning and return WaitForInput". The
  // event is rejected and the state stays as it was; logging is the caller's business.
  return [state, { accepted: false, actions: ["WaitForInput"] }];
}

function llmEvent(state: { readonly retries: number }, event: LlmEvent): readonly [AgentState, Outcome] {
  switch (event.kind) {
    case "TextDelta":
      return accept({ kind: "CallingLlm", retries: state.retries }, "DisplayMessage");
    case "ToolCallDelta":
      return accept({ kind: "CallingLlm", retries: state.retries }, "WaitForInput");
    case "Completed":
      return processLlmResponse(event.toolCalls);
    case "Error":
      if (state.retries < MAX_RETRIES) {
        return accept({ kind: "Error", origin: "Llm", retries: state.retries + 1 }, "WaitForInput");
      }
      return accept({ kind: "WaitingForUserInput" }, "DisplayError");
    default:
      return unreachable(event);
  }
}

/** ProcessingLlmResponse: tool calls present or a text-only response, decided at once. */
function processLlmResponse(toolCalls: number): readonly [AgentState, Outcome] {
  if (toolCalls > 0) {
    return accept({ kind: "ExecutingTools", pending: toolCalls, failed: 0, mutated: false, retries: 0 }, "ExecuteTools");
  }
  return accept({ kind: "WaitingForUserInput" }, "WaitForInput");
}

/**
 * One execution settled: it completed (`mutated` includes it) or could not be executed
 * (`failed` 1). Some still pending; or all settled and some could not run, retried while
 * retries remain; or the batch is over (the calls that could not run go to the model as
 * error outcomes), with or without a mutation.
 */
function toolSettled(
  state: Extract<AgentState, { kind: "ExecutingTools" }>,
  mutated: boolean,
  failed: 0 | 1,
): readonly [AgentState, Outcome] {
  const { pending, retries } = state;
  const total = state.failed + failed;
  if (pending > 1) return accept({ ...state, pending: pending - 1, failed: total, mutated }, "WaitForInput");
  if (total > 0 && retries < MAX_RETRIES) {
    return accept({ kind: "Error", origin: "Tool", retries: retries + 1, failed: total, mutated }, "WaitForInput");
  }
  if (mutated) return accept({ kind: "PostToolsHook", retries: 0 }, "RunPostToolsHook");
  return accept({ kind: "CallingLlm", retries: 0 }, "SendLlmRequest");
}

/** The hook failed: run it again while retries remain, else skip it, say so, and call the model. */
function hookFailed(retries: number): readonly [AgentState, Outcome] {
  if (retries < MAX_RETRIES) return accept({ kind: "Error", origin: "Io", retries: retries + 1 }, "WaitForInput");
  return [{ kind: "CallingLlm", retries: 0 }, { accepted: true, actions: ["DisplayError", "SendLlmRequest"] }];
}

/** The retry timer fired: retry what failed, keeping the retry count. */
function retry(state: Extract<AgentState, { kind: "Error" }>): readonly [AgentState, Outcome] {
  switch (state.origin) {
    case "Llm":
      return accept({ kind: "CallingLlm", retries: state.retries }, "SendLlmRequest");
    case "Tool": {
      const { retries, failed, mutated } = state;
      return accept({ kind: "ExecutingTools", pending: failed, failed: 0, mutated, retries }, "ExecuteTools");
    }
    case "Io":
      return accept({ kind: "PostToolsHook", retries: state.retries }, "RunPostToolsHook");
    default:
      return unreachable(state);
  }
}

function accept(next: AgentState, action: AgentAction): readonly [AgentState, Outcome] {
  return [next, { accepted: true, actions: [action] }];
}

/** A compile-time check that a switch covers every variant; throws only on a type hole. */
function unreachable(value: never): never {
  throw new Error(`unhandled variant ${JSON.stringify(value)}`);
}
