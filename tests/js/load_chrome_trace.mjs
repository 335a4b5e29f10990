// Load a Chrome trace-event JSON file with Chrome DevTools' own trace engine (@paulirish/trace_engine, the
// Performance panel's parser) and print what it parsed as JSON: events, slices per thread, bounds.
import {analyzeTrace} from '@paulirish/trace_engine/analyze-trace.mjs';

const {parsedTrace} = await analyzeTrace(process.argv[2]);
const data = parsedTrace.data;
const threads = [];
let slices = 0;
for (const [pid, proc] of data.Renderer.processes) {
  for (const [tid, thread] of proc.threads) {
    threads.push({pid, tid, name: thread.name ?? null, slices: thread.entries.length});
    slices += thread.entries.length;
  }
}
const processNames = {};
for (const [pid, ev] of data.Meta.processNames) processNames[pid] = ev.args.name;
console.log(JSON.stringify({
  events: parsedTrace.traceEvents.length, slices, threads, processNames,
  bounds: {min: data.Meta.traceBounds.min, max: data.Meta.traceBounds.max},
}));
