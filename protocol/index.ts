/** The I/O-free protocol core shared by workflows, activities and the API. */
export * from './status';
export * from './progress';
export * from './tasks';
export * from './errors';
export * from './snapshot';
export * from './ids';
export * from './outcome';
export * from './webhook-payload';
export * from './task-records';
export * from './request-shaping';
export * from './resource-match';
