// The console's shared components and hooks: every view builds its forms, tables, messages and
// actions from these, so that labels, roles and keyboard behaviour are the same on every screen.
export { ActionButton, ActionForm, SubmitButton, useAction, type Action } from "./actions";
export { formatBytes, formatTime, useLoad } from "./data";
export { SelectField, TextArea, TextField, useFields } from "./fields";
export { Crumbs, RefreshButton, Section } from "./layout";
export { Badge, ErrorBox, Loading, Notice } from "./messages";
export { DataTable } from "./table";
