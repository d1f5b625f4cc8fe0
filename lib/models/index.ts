/** The model table: models declared once, served by every transport. */
export { ModelTable } from './model-table'
export { serverMetadata, SERVER_EXTENSIONS } from './server-metadata'
