import type { HealthModel } from '../../schemas/health.js';
import { type Aggregates, type Scored, scoreAggregates } from './score.js';

export interface ScoreTask {
  model: HealthModel;
  aggregates: Aggregates;
}

/** piscina worker: one chunk of a large workspace, plain data in and out. */
export default function scoreChunk(task: ScoreTask): Scored {
  return scoreAggregates(task.model, task.aggregates);
}
