/**
 * The Loom agent conversation loop (seed 000), written by hand in TypeScript from the
 * table spec/loom-agent.yaml: an independent implementation, not generated from the table
 * or from the Python code.
 *
 * It has the shape of the seed's Rust: the state is a discriminated union whose variants
 * carry their own data, and `handleEvent` matches on (state, event) and returns the
 * actions for the caller to perform. The engine does no I/O and never waits.
 */

/** The table's constants: retry attempts for one LLM request, tool calls in one response. */
export const MAX_RETRIES = 3;
export const MAX_TOOLS = 2;

/**
 * The states a caller can observe. ProcessingLlmResponse is transient (it "immediately
 * transitions"), so it is not a variant but a function, `processLlmResponse`: the type
 * system then guarantees the agent never rests in it.
 */
export type AgentState =
  | { readonly kind: "WaitingForUserInput" }
  /** `retries`: retry attempts made for the current LLM request. */
  | { readonly kind: "CallingLlm"; readonly retries: number }
  /** `pending`: executions not yet completed (at least one); `mutated`: a completed one modified the workspace. */
  | { readonly kind: "ExecutingTools"; readonly pending: number; readonly mutated: boolean }
  /** Entered only after a batch with a mutating tool. */
  | { readonly kind: "PostToolsHook" }
  /** A failed LLM request waiting for its retry timer; keeps the retry count. */
  | { readonly kind: "Error"; readonly retries: number }
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
  | { readonly kind: "PostToolsHookCompleted"; readonly actionTaken: boolean }
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
      if (event.kind === "ToolCompleted") return toolCompleted(state, event.mutating);
      break;
    case "PostToolsHook":
      if (event.kind === "PostToolsHookCompleted") return accept({ kind: "CallingLlm", retries: 0 }, "SendLlmRequest");
      break;
    case "Error":
      if (event.kind === "RetryTimeoutFired") {
        return accept({ kind: "CallingLlm", retries: state.retries }, "SendLlmRequest");
      }
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
      if (state.retries < MAX_RETRIES) return accept({ kind: "Error", retries: state.retries + 1 }, "WaitForInput");
      return accept({ kind: "WaitingForUserInput" }, "DisplayError");
    default:
      return unreachable(event);
  }
}

/** ProcessingLlmResponse: tool calls present or a text-only response, decided at once. */
function processLlmResponse(toolCalls: number): readonly [AgentState, Outcome] {
  if (toolCalls > 0) return accept({ kind: "ExecutingTools", pending: toolCalls, mutated: false }, "ExecuteTools");
  return accept({ kind: "WaitingForUserInput" }, "WaitForInput");
}

/** One execution finished: some still pending, or all done with or without a mutation. */
function toolCompleted(
  state: Extract<AgentState, { kind: "ExecutingTools" }>,
  mutating: boolean,
): readonly [AgentState, Outcome] {
  const mutated = state.mutated || mutating;
  if (state.pending > 1) return accept({ kind: "ExecutingTools", pending: state.pending - 1, mutated }, "WaitForInput");
  if (mutated) return accept({ kind: "PostToolsHook" }, "RunPostToolsHook");
  return accept({ kind: "CallingLlm", retries: 0 }, "SendLlmRequest");
}

function accept(next: AgentState, action: AgentAction): readonly [AgentState, Outcome] {
  return [next, { accepted: true, actions: [action] }];
}

/** A compile-time check that a switch covers every variant; throws only on a type hole. */
function unreachable(value: never): never {
  throw new Error(`unhandled variant ${JSON.stringify(value)}`);
}
